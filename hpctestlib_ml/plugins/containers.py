"""Containers: the ``*Container`` checks run the launch command in an image,
with the container platform the partition names (the decisions:
:mod:`hpctestlib_ml.container`; the command lines:
:mod:`hpctestlib_ml.container_launch`).

Site settings read (for a declaration of the partition ``extras`` keys):

``container_platforms`` (ReFrame's partition setting, not an extras key)
    The platform: its entry's ``type``, one of ``Apptainer``, ``Podman``,
    ``PodmanHPC``, ``Pyxis``, ``ContainerEngine``, ``Sarus``,
    ``Singularity``; the entry
    with ``default: True``, else the first. Without one, a partition runs
    no ``*Container`` case.
``extras['container_images']``
    :type: ``dict`` of ``str`` to ``str``: framework (``pytorch``,
        ``tensorflow``) to image (a SIF path for Apptainer; a Podman
        reference; an enroot URI ``nvcr.io#nvidia/pytorch:25.02-py3`` or
        squashfs path for Pyxis and the Container Engine; a Sarus
        reference).
    :default: ``{}``: the image ``make image`` builds (Podman:
        ``localhost/hpcml:<tag>``, Apptainer:
        ``<VAR_DIR>/image/hpcml-<tag>.sif``; the other platforms have
        none: name one).
``extras['container_options']``
    :type: ``list`` of ``str``: options added to the runtime's command
        (``podman run``'s, ``apptainer exec``'s, ``sarus run``'s, or
        srun's for Pyxis), e.g. ``['--security-opt', 'label=disable']`` on
        SELinux hosts.
    :default: ``[]``
``extras['container_gpu_options']``
    :type: ``list`` of ``str``: the runtime's options that give the
        container the partition's GPUs, in place of the platform's
        (``--nv``, ``--rocm``, ...); ``[]``: none (an image that brings
        its own ROCm on a runtime that mounts ``/dev``, as LUMI runs).
    :default: :obj:`None`: the platform's
        (:data:`hpctestlib_ml.container_launch.GPU_OPTIONS`)
``extras['container_annotations']``
    :type: ``dict`` of ``str`` to ``str``: the Container Engine's EDF
        ``[annotations]``, e.g. ``{'com.hooks.aws_ofi_nccl.enabled':
        'true', 'com.hooks.aws_ofi_nccl.variant': 'cuda12'}`` (NCCL over
        Slingshot).
    :default: ``{}``
``extras['gpu_vendor']``
    :type: ``str``: ``nvidia`` or ``amd``.
    :default: from the GPU model (:data:`hpctestlib_ml.constants.GPU_VENDORS`)
"""
import dataclasses
import os
import re

from reframe.core.builtins import run_before, variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import container, container_launch
from hpctestlib_ml.constants import FRAMEWORKS
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.paths import REPO_ROOT

_EXPORT = re.compile(r'^\s*export\s+([A-Za-z_]\w*)=', re.M)


class Containers(RegressionTestPlugin):
    '''The image a case runs in, where it runs in one.'''

    #: Run the program in the framework's image (the ``*Container``
    #: checks): only on partitions whose config names a container platform
    #: (:data:`~hpctestlib_ml.container_launch.PLATFORMS`).
    #:
    #: :type: :class:`bool`
    #: :default: :obj:`False`
    runs_in_container = variable(bool, value=False)

    #: Image to run in; after the run, where the platform says it, with its
    #: digest (``localhost/hpcml:<tag>@sha256:...``), as logged.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None`: the partition's
    #:     ``extras['container_images'][framework]``, else the image
    #:     ``make image`` builds for the partition's platform
    container_image = variable(str, type(None), value=None)

    def refuse_unused_image(self):
        '''``-S container_image`` on a check that runs no container: a
        :class:`~hpctestlib_ml.errors.BadInputError`, not an image logged
        as the provenance of a run that never used it.'''
        if self.container_image is not None and not self.runs_in_container:
            name = type(self).__name__
            raise BadInputError(
                f'-S container_image={self.container_image}: {name} runs no '
                f'container: give it to its twin, -S '
                f'{name}Container.container_image=..., or drop it')

    def container_platform_name(self):
        '''The partition's container platform (ReFrame's default one).'''
        return self.current_partition.container_runtime

    def use_container(self):
        '''Run the launch command in the framework's image with the
        partition's platform: the repository, the stage directory and the
        workload's own directories bind-mounted at their paths, the GPUs'
        options from the partition's vendor, the job's environment passed.'''
        part = self.current_partition
        if self.framework not in FRAMEWORKS:
            raise BadInputError(f'no container image for framework '
                                f'{self.framework!r}: known are '
                                f'{", ".join(FRAMEWORKS)}')
        name = self.container_platform_name()
        models = ([d.model for d in part.select_devices('gpu')]
                  if self.uses_gpus else [])
        try:
            vendor = container.gpu_vendor(models, part.extras)
            image = container.image_for(self.framework, vendor, name,
                                        part.extras, self.container_image)
            run = container_launch.ContainerRun(
                image=image,
                command=container.command_line(self.executable,
                                               self.executable_opts),
                mounts=container.mount_points(
                    [REPO_ROOT, self.stagedir,
                     *self.container_directories()]),
                workdir=self.stagedir, gpu_vendor=vendor,
                env=tuple(self.job_environment_names()),
                options=tuple(part.extras.get('container_options', [])),
                gpu_options=(None if part.extras.get('container_gpu_options')
                             is None else tuple(
                                 part.extras['container_gpu_options'])),
                annotations=tuple(sorted(part.extras.get(
                    'container_annotations', {}).items())))
            platform, launcher_options = container_launch.platform(
                name, run, self.stagedir, part.launcher_type.registered_name)
        except container.ContainerError as err:
            raise BadInputError(f'{part.fullname}: {err}') from None

        self.container_image = image
        self.prerun_cmds += container.image_lines(name, image)
        self.job.launcher.options += launcher_options
        self.container_platform = platform

    def job_environment_names(self):
        '''Names of the variables the job script sets: the test's, the
        partition's, the environment's and the container platform's
        ``env_vars``, and those its commands export.'''
        part = self.current_partition
        names = [*self.env_vars, *part.local_env.env_vars,
                 *self.current_environ.env_vars]
        platform_env = part.container_environs.get(
            self.container_platform_name())
        if platform_env:
            names += list(platform_env.env_vars)
        names += _EXPORT.findall('\n'.join(self.prerun_cmds))
        return list(dict.fromkeys(names))

    @run_before('run')
    def pass_job_environment(self):
        '''The environment names as they are when the job script is
        written (hooks after setup may add some).'''
        if self.runs_in_container and hasattr(self.container_platform,
                                              'run'):
            self.container_platform.run = dataclasses.replace(
                self.container_platform.run,
                env=tuple(self.job_environment_names()))

    @run_before('performance')
    def record_image_digest(self):
        '''``container_image`` with the digest the job read, where its
        platform reads one (:func:`hpctestlib_ml.container.image_lines`).'''
        if not self.runs_in_container:
            return
        self.container_image = container.image_with_digest(
            self.container_image,
            os.path.join(self.stagedir, container.DIGEST_FILE))
