"""The suite's container image: what ``make image`` (``hpcml image``)
builds, from what, and under which name.

The recipe is ``containers/setup.sh``, run inside the image by either front
end: ``containers/Containerfile`` (Podman) or ``containers/hpcml.def``
(Apptainer). It installs, from a wheelhouse the host downloads, the pins of
``pyproject.toml``'s extras (:data:`DEFAULT_EXTRAS`: the ``.venv``'s), on a
Debian made with debootstrap where no registry is reachable, or on the
image ``--base`` names. The image is named by a hash of the recipe, the
pins and the base (:func:`recipe_tag`), so that a changed pin names another
image and the suite never runs a stale one: ``localhost/hpcml:<tag>`` in
Podman's storage, ``<VAR_DIR>/image/hpcml-<tag>.sif`` for Apptainer. What
``hpcml prepare`` fetched goes in last, under :data:`IMAGE_PREPARED_DIR`
(its manifest in the image's ``org.hpcml.prepared`` label).

Pure functions over the repository's files; the build itself:
:mod:`hpctestlib_ml.commands.image`.
"""
import hashlib
import pathlib
import re
import tomllib

from hpctestlib_ml.paths import CONTAINERS_DIR, PREPARED_DIR, REPO_ROOT, \
    VAR_DIR

#: Podman's name of the suite's image (its tag: :func:`recipe_tag`).
IMAGE_NAME = 'localhost/hpcml'

#: The ``pyproject.toml`` extras the image installs by default: the
#: ``.venv``'s frameworks (the PyTorch stack and tensorflow-cpu, which pin
#: nothing in common). ``--extras tensorflow-gpu`` builds ResNet50TF's
#: GPU image instead.
DEFAULT_EXTRAS = ('pytorch', 'tensorflow')

#: The recipe's files in ``containers/``: a change to any names another
#: image.
RECIPE_FILES = ('Containerfile', 'hpcml.def', 'setup.sh')

#: The Debian the base is made of where no base image is named: the
#: release, its packages beside ``--variant=minbase`` (Python with venv and
#: the CA certificates) and the mirror (debootstrap(8)).
DEBIAN_RELEASE = 'bookworm'
DEBIAN_PACKAGES = ('python3', 'python3-venv', 'ca-certificates')
DEBIAN_MIRROR = 'http://deb.debian.org/debian'

#: Where the image keeps what ``hpcml prepare`` fetched (GPT-2 and
#: WikiText-2): the container cases read it there, offline.
IMAGE_PREPARED_DIR = '/opt/hpcml/prepared'

#: Where ``hpcml image`` builds: the context (wheelhouse, requirements,
#: recipe, prepared data) and Apptainer's images.
BUILD_DIR = pathlib.Path(VAR_DIR) / 'image'


class ImageError(ValueError):
    '''An image setting that cannot work; the message names the fix.'''


def pins(extras=DEFAULT_EXTRAS):
    '''The requirements of ``pyproject.toml``'s *extras*, in its order,
    each once.'''
    with open(REPO_ROOT / 'pyproject.toml', 'rb') as fp:
        declared = tomllib.load(fp)['project']['optional-dependencies']
    unknown = [e for e in extras if e not in declared]
    if unknown:
        raise ImageError(f'no extra {", ".join(unknown)} in pyproject.toml: '
                         f'use {", ".join(sorted(declared))}')
    found = []
    for extra in extras:
        found += [r for r in declared[extra] if r not in found]
    return found


def requirements_text(extras=DEFAULT_EXTRAS):
    '''The build context's ``requirements.txt``.'''
    return ''.join(f'{r}\n' for r in pins(extras))


def base_spec(base=None):
    '''What the base is: the image *base* names, else the debootstrap
    command's settings.'''
    if base:
        return f'image {base}'
    return (f'debootstrap --variant=minbase --include='
            f'{",".join(DEBIAN_PACKAGES)} {DEBIAN_RELEASE} {DEBIAN_MIRROR}')


def recipe_tag(extras=DEFAULT_EXTRAS, base=None):
    '''12 hex digits of the hash of the recipe's files, the pins and the
    base: the image's tag.'''
    digest = hashlib.sha256()
    for name in RECIPE_FILES:
        digest.update(name.encode() + b'\0')
        digest.update((CONTAINERS_DIR / name).read_bytes())
    digest.update(requirements_text(extras).encode())
    digest.update(base_spec(base).encode())
    return digest.hexdigest()[:12]


def podman_image(tag=None, name=None):
    '''Podman's reference of the image with *tag* (default: the recipe's
    of :data:`DEFAULT_EXTRAS` on the Debian base) and *name* (default
    :data:`IMAGE_NAME`, the one the site configurations look for).'''
    return f'{name or IMAGE_NAME}:{tag or recipe_tag()}'


def apptainer_image(tag=None):
    '''The SIF file ``hpcml image`` builds with Apptainer.'''
    return BUILD_DIR / f'hpcml-{tag or recipe_tag()}.sif'


def base_tag(base=None):
    '''Tag of the Debian base in Podman's storage (``hpcml-base``).'''
    return hashlib.sha256(base_spec(base).encode()).hexdigest()[:12]


def prepared_manifest(root=PREPARED_DIR):
    '''12 hex digits of the hash of what *root* holds (each file's path and
    size), ``none`` where it holds nothing: the image's
    ``org.hpcml.prepared`` label, which says whether an image has what
    ``hpcml prepare`` fetched since.'''
    root = pathlib.Path(root)
    files = sorted(p for p in root.rglob('*') if p.is_file()) \
        if root.is_dir() else []
    if not files:
        return 'none'
    digest = hashlib.sha256()
    for path in files:
        digest.update(f'{path.relative_to(root)}\0{path.stat().st_size}\n'
                      .encode())
    return digest.hexdigest()[:12]


def python_tag(version_text):
    '''``(3, 11)`` of ``python3 --version``'s output (``Python 3.11.2``).'''
    match = re.search(r'Python (\d+)\.(\d+)', version_text)
    if not match:
        raise ImageError(f'the base image has no python3 that says its '
                         f'version (got {version_text.strip()!r}): choose a '
                         f'base with Python 3.10 or later')
    return int(match.group(1)), int(match.group(2))


def download_command(pip, requirements, wheelhouse, python=None):
    '''``pip download`` of *requirements* into *wheelhouse* with the host's
    pip configuration (its indexes, local ones included), for the image's
    Python *python* (``(3, 11)``) where it is not the host's: then wheels
    only, as pip cannot build for another interpreter.'''
    command = [*pip, 'download', '--disable-pip-version-check', '--quiet',
               '--dest', str(wheelhouse), '-r', str(requirements)]
    if python:
        command += ['--python-version', f'{python[0]}.{python[1]}',
                    '--only-binary=:all:']
    return command


def size_text(num_bytes):
    '''``8.2 GB`` (decimal, as ``podman images`` says it).'''
    for unit in ('B', 'kB', 'MB', 'GB', 'TB'):
        if num_bytes < 1000 or unit == 'TB':
            return f'{num_bytes:.1f} {unit}' if unit != 'B' else \
                f'{num_bytes} B'
        num_bytes /= 1000


def tool(which):
    '''The container tool to build with: ``podman`` where *which* finds it,
    else ``apptainer``; ImageError naming the fix where neither is.'''
    for name in ('podman', 'apptainer'):
        if which(name):
            return name
    raise ImageError('neither podman nor apptainer is on PATH: install '
                     'Podman (containers/install-podman.sh, as root on '
                     'Debian or Ubuntu) or Apptainer')

