"""Containers: the ``*Container`` checks run the launch command in the
framework's Apptainer image (the decisions: :mod:`hpctestlib_ml.container`).
"""
from reframe.core.builtins import variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import container
from hpctestlib_ml.constants import CONTAINER_PLATFORM, FRAMEWORKS
from hpctestlib_ml.errors import BadInputError


class Containers(RegressionTestPlugin):
    '''The image a case runs in, where it runs in one.'''

    #: Run the program in the framework's Apptainer image (the
    #: ``*Container`` checks): only on partitions whose config lists the
    #: Apptainer container platform.
    #:
    #: :type: :class:`bool`
    #: :default: :obj:`False`
    runs_in_container = variable(bool, value=False)

    #: Image to run in; logged with the results.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None`: the partition's
    #:     ``extras['container_images'][framework]``, else
    #:     ``containers/<framework>.sif`` in the repository
    container_image = variable(str, type(None), value=None)

    def use_container(self):
        '''Run the launch command in the framework's image (ReFrame's
        container platform): the repository bind-mounted at its path, the
        GPUs' runtime option from the partition's vendor.'''
        part = self.current_partition
        if self.framework not in FRAMEWORKS:
            raise BadInputError(f'no container image for framework '
                                f'{self.framework!r}: known are '
                                f'{", ".join(FRAMEWORKS)}')
        models = ([d.model for d in part.select_devices('gpu')]
                  if self.uses_gpus else [])
        try:
            vendor = container.gpu_vendor(models, part.extras)
            options = container.runtime_options(vendor)
            image = container.image_for(self.framework, vendor, part.extras,
                                        self.container_image)
        except container.ContainerError as err:
            raise BadInputError(f'{part.fullname}: {err}') from None

        self.container_image = image
        self.prerun_cmds.append(container.image_check(image, self.framework))
        self.container_platform = CONTAINER_PLATFORM
        platform = self.container_platform
        platform.image = image
        platform.command = container.command_line(self.executable,
                                                  self.executable_opts)
        platform.mount_points = container.mount_points(
            self.container_directories())
        platform.options = options
