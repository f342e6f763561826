"""``hpcml image [--base IMAGE] [--extras E,...] [--tool T] [--force]``
(``make image``): build the suite's container image with the tool found,
Podman else Apptainer (what is built, and its name:
:mod:`hpctestlib_ml.image`).

Steps: the base (a Debian made with debootstrap, kept in Podman's storage
as ``localhost/hpcml-base:<hash>``, unless ``--base`` names one), the
wheelhouse (``pip download`` of the pins on this host, with this host's pip
configuration: a build cannot see the host's local indexes), the context
(``<VAR_DIR>/image/context``), the build. An image whose tag exists, with
the same prepared data, is kept (``--force`` rebuilds it). Each step's
time, the image's size and digest are printed at the end.
"""
import json
import os
import shutil
import subprocess
import sys
import time

from hpctestlib_ml import image
from hpctestlib_ml.paths import CONTAINERS_DIR, PREPARED_DIR

#: The command's line in ``hpcml --help``.
HELP = ("build the suite's container image (make image): Podman, else "
        "Apptainer")


def add_arguments(parser):
    parser.add_argument('--base', help='base image (a local or NGC one); '
                        'default: a Debian made with debootstrap')
    parser.add_argument('--extras', default=','.join(image.DEFAULT_EXTRAS),
                        help="pyproject.toml's extras to install (default: "
                             "%(default)s)")
    parser.add_argument('--tool', choices=('podman', 'apptainer'),
                        help='default: podman where it is on PATH, else '
                             'apptainer')
    parser.add_argument('--force', action='store_true',
                        help='build even where the image exists')
    parser.add_argument('--name', default=image.IMAGE_NAME,
                        help="Podman: the image's name (default: "
                             '%(default)s, the one config/local.py looks '
                             'for; .ci/run builds under another name '
                             'beside the tests, then tags it)')


class StepFailed(Exception):
    '''A step's command failed; the message says which and how.'''


class Steps:
    '''Runs the build's commands, each printed, and times its steps.'''

    def __init__(self):
        self.times = {}

    def run(self, step, command, **kwargs):
        print(f'hpcml image: {step}: {" ".join(map(str, command))}',
              flush=True)
        start = time.monotonic()
        kwargs.setdefault('stdin', subprocess.DEVNULL)
        try:
            proc = subprocess.run(list(map(str, command)), **kwargs)
        except FileNotFoundError:
            raise StepFailed(f'{step}: {command[0]} is not installed '
                             f'(containers/install-podman.sh installs '
                             f'podman, runc and debootstrap)') from None
        self.times[step] = self.times.get(step, 0) + \
            time.monotonic() - start
        if proc.returncode != 0:
            raise StepFailed(f'{step} failed (exit status {proc.returncode}'
                             f'): {" ".join(map(str, command))}')
        return proc

    def output(self, step, command):
        return self.run(step, command, capture_output=True,
                        text=True).stdout


def make_rootfs(steps, rootfs):
    '''The Debian of :func:`hpctestlib_ml.image.base_spec` in *rootfs*.'''
    if os.geteuid() != 0:
        raise StepFailed('the Debian base needs root (debootstrap): run make '
                         'image as root once, or name a base with --base')
    shutil.rmtree(rootfs, ignore_errors=True)
    steps.run('base', ['debootstrap', '--variant=minbase',
                       f'--include={",".join(image.DEBIAN_PACKAGES)}',
                       image.DEBIAN_RELEASE, rootfs, image.DEBIAN_MIRROR])


def make_context(steps, context, extras, python):
    '''The build context: requirements, recipe, wheelhouse for the
    image's *python* ((major, minor)), prepared data (hard links where
    they can be).'''
    context.mkdir(parents=True, exist_ok=True)
    (context / 'requirements.txt').write_text(image.requirements_text(extras))
    shutil.copy2(CONTAINERS_DIR / 'setup.sh', context / 'setup.sh')
    wheelhouse = context / 'wheelhouse'
    stamp = wheelhouse / '.python'
    wanted = f'{python[0]}.{python[1]}'
    if stamp.exists() and stamp.read_text() != wanted:
        shutil.rmtree(wheelhouse)
    wheelhouse.mkdir(exist_ok=True)
    host = sys.version_info[:2]
    steps.run('wheelhouse', image.download_command(
        [sys.executable, '-m', 'pip'], context / 'requirements.txt',
        wheelhouse, None if host == python else python))
    stamp.write_text(wanted)
    prepared = context / 'prepared'
    shutil.rmtree(prepared, ignore_errors=True)
    if os.path.isdir(PREPARED_DIR):
        shutil.copytree(PREPARED_DIR, prepared, copy_function=link_or_copy)
    else:
        prepared.mkdir()


def link_or_copy(source, destination):
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


class PodmanBuild:
    def __init__(self, steps, args):
        self.steps, self.args = steps, args
        self.extras = args.extras.split(',')
        self.tag = image.recipe_tag(self.extras, args.base)
        self.ref = image.podman_image(self.tag, args.name)

    def exists(self, ref):
        return subprocess.run(['podman', 'image', 'exists', ref],
                              stdin=subprocess.DEVNULL).returncode == 0

    def label(self, ref, name):
        return subprocess.run(
            ['podman', 'image', 'inspect', '--format',
             f'{{{{index .Labels "{name}"}}}}', ref], capture_output=True,
            text=True, stdin=subprocess.DEVNULL).stdout.strip()

    def up_to_date(self, manifest):
        return self.exists(self.ref) and \
            self.label(self.ref, 'org.hpcml.prepared') == manifest

    def base(self):
        if self.args.base:
            return self.args.base
        ref = f'localhost/hpcml-base:{image.base_tag()}'
        if not self.exists(ref):
            rootfs = image.BUILD_DIR / 'rootfs'
            make_rootfs(self.steps, rootfs)
            tar = subprocess.Popen(['tar', '-C', str(rootfs), '-c', '.'],
                                   stdout=subprocess.PIPE)
            self.steps.run('base', ['podman', 'import', '-', ref],
                           stdin=tar.stdout, stdout=subprocess.DEVNULL)
            tar.wait()
            shutil.rmtree(rootfs)
        return ref

    def python(self, base):
        return image.python_tag(self.steps.output(
            'base', ['podman', 'run', '--rm', base, 'python3', '--version']))

    def build(self, base, context, manifest):
        self.steps.run('build', [
            'podman', 'build', '--file', CONTAINERS_DIR / 'Containerfile',
            '--build-arg', f'BASE={base}', '--build-arg',
            f'RECIPE={self.tag}', '--build-arg', f'PREPARED={manifest}',
            '--tag', self.ref, context])

    def describe(self):
        size, digest = self.steps.output('inspect', [
            'podman', 'image', 'inspect', '--format',
            '{{.Size}} {{.Digest}}', self.ref]).split()
        return f'{self.ref} ({digest}), {image.size_text(int(size))}'


class ApptainerBuild(PodmanBuild):
    def __init__(self, steps, args):
        super().__init__(steps, args)
        self.sif = image.apptainer_image(self.tag)
        self.record = self.sif.with_suffix('.json')
        self.build_options = [] if os.geteuid() == 0 else ['--fakeroot']

    def up_to_date(self, manifest):
        if not (self.sif.exists() and self.record.exists()):
            return False
        return json.loads(self.record.read_text()).get('prepared') == manifest

    def base(self):
        base = self.args.base
        if base and base.endswith('.sif'):
            return base
        sif = image.BUILD_DIR / f'hpcml-base-{image.base_tag(base)}.sif'
        if sif.exists():
            return sif
        image.BUILD_DIR.mkdir(parents=True, exist_ok=True)
        if base:
            source = base if '://' in base else f'docker://{base}'
            self.steps.run('base', ['apptainer', 'build', *self.build_options,
                                    sif, source])
        else:
            rootfs = image.BUILD_DIR / 'rootfs'
            make_rootfs(self.steps, rootfs)
            self.steps.run('base', ['apptainer', 'build', *self.build_options,
                                    sif, rootfs])
            shutil.rmtree(rootfs)
        return sif

    def python(self, base):
        return image.python_tag(self.steps.output(
            'base', ['apptainer', 'exec', base, 'python3', '--version']))

    def build(self, base, context, manifest):
        self.steps.run('build', [
            'apptainer', 'build', *self.build_options, '--force',
            '--build-arg', f'BASE={base}', '--build-arg', f'CONTEXT={context}',
            '--build-arg', f'RECIPE={self.tag}', '--build-arg',
            f'PREPARED={manifest}', self.sif, CONTAINERS_DIR / 'hpcml.def'])
        digest = self.steps.output('inspect',
                                   ['sha256sum', self.sif]).split()[0]
        self.record.write_text(json.dumps(
            {'recipe': self.tag, 'prepared': manifest,
             'digest': f'sha256:{digest}'}) + '\n')

    def describe(self):
        digest = json.loads(self.record.read_text())['digest']
        return (f'{self.sif} ({digest}), '
                f'{image.size_text(self.sif.stat().st_size)}')


def run(args):
    '''Build, or say the image is up to date; exit status 1 with the failed
    step named, 2 on bad input.'''
    start = time.monotonic()
    try:
        tool = args.tool or image.tool(shutil.which)
        if not shutil.which(tool):
            # Before minutes of debootstrap, not after.
            raise image.ImageError(
                f'--tool {tool}: {tool} is not on PATH: install it, or '
                f'build with the other tool (podman or apptainer)')
        steps = Steps()
        build = (PodmanBuild if tool == 'podman' else ApptainerBuild)(steps,
                                                                     args)
    except image.ImageError as err:
        print(f'hpcml image: error: {err}', file=sys.stderr)
        return 2
    manifest = image.prepared_manifest()
    try:
        if not args.force and build.up_to_date(manifest):
            print(f'hpcml image: up to date: {build.describe()}')
            return 0
        base = build.base()
        python = build.python(base)
        context = image.BUILD_DIR / 'context'
        make_context(steps, context, build.extras, python)
        build.build(base, context, manifest)
        described = build.describe()
    except (StepFailed, image.ImageError) as err:
        print(f'hpcml image: error: {err}', file=sys.stderr)
        return 1
    timing = ', '.join(f'{step} {seconds:.0f} s'
                       for step, seconds in steps.times.items())
    print(f'hpcml image: built {described} in '
          f'{time.monotonic() - start:.0f} s ({timing})')
    return 0
