"""Run a workload's program inside an Apptainer image (the ``*Container``
checks), with ReFrame's container platform support.

The repository is bind-mounted at its own path, so the launch scripts and
``PYTHONPATH=src`` work unchanged inside; the image brings only the
framework and the programs' pinned dependencies (``containers/*.def``).
Launch stays outside: srun (or torchrun inside the image, per node) starts
``apptainer exec`` for each task.

Pure functions over plain values; :mod:`hpctestlib_ml.plugins.containers` applies them.
"""
import os
import shlex

from hpctestlib_ml.constants import CONTAINER_GPU_OPTIONS, GPU_VENDORS
from hpctestlib_ml.paths import CONTAINERS_DIR, REPO_ROOT

#: Where a site's built images are looked for when its config names none:
#: ``containers/<framework>.sif`` beside the definition files.
DEFAULT_IMAGE_DIR = CONTAINERS_DIR


class ContainerError(ValueError):
    '''A container setting that cannot work; the message names the fix.'''


def image_path(framework, extras, override=None):
    '''The image for *framework*: ``-S container_image``, else the
    partition's ``extras['container_images'][framework]``, else
    ``containers/<framework>.sif`` in the repository.'''
    if override:
        return override
    images = extras.get('container_images', {})
    return images.get(framework, str(repository_image(framework)))


def repository_image(framework):
    '''Where the README builds *framework*'s image from its definition.'''
    return DEFAULT_IMAGE_DIR / f'{framework}.sif'


#: The image a site must build itself for each vendor whose GPUs the
#: repository's images (``containers/*.def``: NGC's CUDA builds) do not
#: drive.
FOREIGN_VENDOR_IMAGES = {'amd': 'ROCm'}


def image_for(framework, vendor, extras, override=None):
    ''':func:`image_path`, refused where the repository's image cannot use
    the partition's GPUs: Apptainer gives an AMD partition ``--rocm``, but
    NGC's CUDA PyTorch then finds no GPU and trains on the CPU. There, the
    image must be one the site or the command line names, not
    ``containers/<framework>.sif`` (the README's build of the CUDA
    definition).'''
    image = image_path(framework, extras, override)
    kind = FOREIGN_VENDOR_IMAGES.get(vendor)
    if kind and os.path.abspath(image) == str(repository_image(framework)):
        raise ContainerError(
            f'{image} is built from containers/{framework}.def, a CUDA '
            f'image that cannot use {vendor.upper()} GPUs: name a {kind} '
            f"image in the partition's extras['container_images']"
            f"['{framework}'] (config/slurm.py: HPCML_CONTAINER_DIR), or "
            f'-S container_image=')
    return image


def gpu_vendor(models, extras):
    '''``nvidia``, ``amd`` or None (no GPUs) for a partition whose GPUs are
    *models*; ``extras['gpu_vendor']`` wins.'''
    if extras.get('gpu_vendor'):
        return extras['gpu_vendor']
    vendors = {GPU_VENDORS.get(m) for m in models}
    if not models:
        return None
    if None in vendors or len(vendors) != 1:
        raise ContainerError(
            f'GPU vendor of {", ".join(sorted(map(str, models)))} unknown: '
            f"set extras 'gpu_vendor' ('nvidia' or 'amd') of the partition")
    return vendors.pop()


def runtime_options(vendor):
    '''Apptainer options for a partition's GPUs (none on CPU partitions).'''
    if vendor is None:
        return []
    try:
        return [CONTAINER_GPU_OPTIONS[vendor]]
    except KeyError:
        raise ContainerError(
            f"gpu_vendor {vendor!r} unknown: use one of "
            f"{', '.join(CONTAINER_GPU_OPTIONS)}") from None


def mount_points(extra=()):
    '''(host, container) bind mounts: the repository at its own path, and
    the directories *extra* at theirs (a workload's own: the storage it
    measures).'''
    return [(str(REPO_ROOT), str(REPO_ROOT))] + [(str(d), str(d))
                                                 for d in extra]


def image_check(image, framework):
    '''Shell line that stops the job, naming the fix, if *image* is missing
    (before every task fails with Apptainer's own message).'''
    quoted = shlex.quote(image)
    definition = DEFAULT_IMAGE_DIR / f'{framework}.def'
    return (f'[ -r {quoted} ] || {{ echo "hpcml: container image {image} '
            f'not found: build it with apptainer build {image} {definition}'
            f' (README: Containers), or set -S container_image=" >&2; '
            f'exit 1; }}')


def command_line(executable, options):
    '''The command Apptainer runs in the image: the launch command.'''
    return ' '.join([executable, *options])
