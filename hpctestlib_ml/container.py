"""Which image a ``*Container`` case runs, with which GPUs, and how the job
checks the image and reads its digest.

The repository is bind-mounted at its own path, so the launch scripts and
``PYTHONPATH=src`` work unchanged inside; the image brings only the
framework and the programs' pinned dependencies (``containers/``, built by
``make image``: :mod:`hpctestlib_ml.image`). Launch stays outside: srun
(or torchrun inside the image, per node) starts the container for each
task (:mod:`hpctestlib_ml.container_launch`).

Pure functions over plain values; :mod:`hpctestlib_ml.plugins.containers`
applies them.
"""
import json
import os
import pathlib
import shlex

from hpctestlib_ml import image as suite_image
from hpctestlib_ml.constants import GPU_VENDORS
from hpctestlib_ml.errors import ContainerError

__all__ = ['ContainerError']

#: Where a job that can read its image's digest writes it (stage
#: directory).
DIGEST_FILE = 'hpcml_container_image.txt'

#: The image a site must build itself for each vendor whose GPUs the
#: suite's image (PyPI's CUDA build of torch) does not drive.
FOREIGN_VENDOR_IMAGES = {'amd': 'ROCm'}

#: Platforms whose images are names in a local image store, with the
#: command that manages it.
_STORES = {'Podman': 'podman', 'PodmanHPC': 'podman-hpc'}


def suite_image_for(platform_name):
    '''The image ``make image`` builds for *platform_name*; None where it
    builds none.'''
    if platform_name == 'Podman':
        return suite_image.podman_image()
    if platform_name == 'Apptainer':
        return str(suite_image.apptainer_image())
    return None


def image_path(framework, platform_name, extras, override=None):
    '''The image for *framework*: ``-S container_image``, else the
    partition's ``extras['container_images'][framework]``, else the suite's
    image for the platform.'''
    if override:
        return override
    images = extras.get('container_images', {})
    if framework in images:
        return images[framework]
    default = suite_image_for(platform_name)
    if default is None:
        raise ContainerError(
            f"no {framework} image for {platform_name}: name one in the "
            f"partition's extras['container_images']['{framework}'] (an "
            f"image built with make image and converted for {platform_name}"
            f", docs/guide/containers.md), or -S container_image=")
    return default


def image_for(framework, vendor, platform_name, extras, override=None):
    ''':func:`image_path`, refused where the suite's image cannot use the
    partition's GPUs: it is a CUDA image (PyPI's torch), so on AMD GPUs it
    finds no GPU and trains on the CPU. There, the image must be one the
    site or the command line names.'''
    image = image_path(framework, platform_name, extras, override)
    kind = FOREIGN_VENDOR_IMAGES.get(vendor)
    if kind and image == suite_image_for(platform_name):
        raise ContainerError(
            f'{image} is the suite\'s image (make image), a CUDA image that '
            f'cannot use {vendor.upper()} GPUs: name a {kind} image in the '
            f"partition's extras['container_images']['{framework}'] "
            f'(config/slurm.py: HPCML_CONTAINER_IMAGE or '
            f'HPCML_CONTAINER_DIR), or -S container_image=')
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


def mount_points(directories):
    '''(host, container) bind mounts of *directories*, each at its own
    path, once; none inside another (the repository holds ``var/`` and its
    stage directories by default).'''
    paths = list(dict.fromkeys(str(d) for d in directories))

    def inside(path, other):
        return path != other and path.startswith(other.rstrip('/') + '/')

    return [(p, p) for p in paths
            if not any(inside(p, other) for other in paths)]


def image_lines(platform_name, image):
    '''Shell lines that stop the job, naming the fix, if *image* is
    missing (before every task fails with the runtime's own message), and
    that write its digest to :data:`DIGEST_FILE` where the platform's store
    says it.'''
    quoted = shlex.quote(image)
    fix = ('build it with make image' if image == suite_image_for(
        platform_name) else f'put it where {platform_name} finds it on the '
        f'nodes')
    missing = (f'echo "hpcml: container image {image} not found: {fix} '
               f'(docs/guide/containers.md), or set -S container_image=" >&2; '
               f'exit 1;')
    store = _STORES.get(platform_name)
    if store:
        return [f'{store} image exists {quoted} || {{ {missing} }}',
                f"{store} image inspect --format '{{{{.Digest}}}}' {quoted} "
                f'> {DIGEST_FILE} || true']
    if image.startswith('/') or platform_name == 'Apptainer':
        return [f'[ -r {quoted} ] || {{ {missing} }}']
    return []       # a registry reference: the runtime pulls it


def image_with_digest(image, digest_file):
    '''*image*@digest where the job wrote the digest to *digest_file*, or
    where ``make image`` recorded it beside a SIF file; else *image*.'''
    digest = ''
    if os.path.exists(digest_file):
        digest = pathlib.Path(digest_file).read_text().strip()
    elif image.endswith('.sif'):
        record = pathlib.Path(image).with_suffix('.json')
        try:
            digest = json.loads(record.read_text()).get('digest', '')
        except (OSError, ValueError):
            pass
    if digest.startswith('sha256:') and '@' not in image:
        return f'{image}@{digest}'
    return image


def command_line(executable, options):
    '''The command the container runs: the launch command.'''
    return ' '.join([executable, *options])
