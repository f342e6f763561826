"""Run a program in an image: one description (:class:`ContainerRun`: the
image, the command, the mounts, the working directory, the GPUs' vendor,
the environment the job sets) and each container platform's way of
starting it (:data:`PLATFORMS`), as centres run ML training:

``Apptainer``
    ``apptainer exec -B... --pwd ... [--nv|--rocm] IMAGE COMMAND`` under
    the job launcher (ReFrame's own Apptainer backend writes it).
``Podman``
    ``podman run --rm ... IMAGE COMMAND`` under the launcher: the platform
    this project runs for real (config/local.py, its Slurm cluster).
``PodmanHPC``
    NERSC's ``podman-hpc run``: Podman's line with ``--gpu``.
``Pyxis``
    NVIDIA's Slurm plugin: ``srun --container-image= --container-mounts=
    --container-workdir= COMMAND``.
``ContainerEngine``
    CSCS's: an EDF (TOML) the job writes to its stage directory, then
    ``srun --environment=<EDF> COMMAND``.
``Sarus``
    ``sarus run --mount=... -w ... IMAGE COMMAND`` (ReFrame's backend).
``Singularity``
    ``singularity exec -B... --pwd ... IMAGE COMMAND``: SingularityCE, the
    runtime of HPE Cray systems such as LUMI, which has no ``apptainer``
    command (ReFrame's backend).

A partition picks its platform with ReFrame's ``container_platforms``
setting (its ``type``: one of these names; the ``default`` one, else the
first); ReFrame adds that entry's ``modules`` and ``env_vars`` to the job.
Every option written is one its platform documents: :data:`DOCUMENTED`
names the page or source of each (tests/test_containers.py checks the
generated job scripts against it).

Pure functions over plain values, and the ReFrame container-platform
objects that carry them into a job (:func:`platform`); the test's side:
:mod:`hpctestlib_ml.plugins.containers`.
"""
import dataclasses
import json
import shlex

from reframe.core.containers import (Apptainer, ContainerPlatform, Sarus,
                                     Singularity)

from hpctestlib_ml.constants import CONTAINER_PLATFORMS
from hpctestlib_ml.errors import ContainerError

#: Where each platform's options are documented: {platform: {option:
#: source}}. An option is the word up to its ``=`` (``--container-image``).
_PODMAN_RUN = 'https://docs.podman.io/en/stable/markdown/podman-run.1.html'
_NVIDIA_CDI = ('https://docs.nvidia.com/datacenter/cloud-native/'
               'container-toolkit/latest/cdi-support.html')
_ROCM_DOCKER = ('https://rocm.docs.amd.com/projects/install-on-linux/en/'
                'latest/how-to/docker.html')
_APPTAINER_EXEC = ('https://apptainer.org/docs/user/main/cli/'
                   'apptainer_exec.html')
_APPTAINER_GPU = 'https://apptainer.org/docs/user/main/gpu.html'
_PODMAN_HPC_GPU = ('https://github.com/NERSC/podman-hpc/blob/main/etc/'
                   'modules.d/gpu.yaml')
_PYXIS = 'https://github.com/NVIDIA/pyxis/wiki/Usage'
_CE_RUN = 'https://docs.cscs.ch/software/container-engine/run/'
_CE_EDF = 'https://docs.cscs.ch/software/container-engine/edf/'
_SARUS_RUN = ('https://github.com/eth-cscs/sarus/blob/master/doc/user/'
              'user_guide.rst')
_SARUS_GPU = ('https://github.com/eth-cscs/sarus/blob/master/doc/config/'
              'gpu-hook.rst')
_ENROOT_HOOKS = ('https://github.com/NVIDIA/enroot/blob/master/doc/'
                 'standard-hooks.md')
_CE_HOOKS = 'https://docs.cscs.ch/software/container-engine/resource-hook/'
_SINGULARITY_EXEC = ('https://docs.sylabs.io/guides/latest/user-guide/cli/'
                     'singularity_exec.html')
_SINGULARITY_GPU = 'https://docs.sylabs.io/guides/latest/user-guide/gpu.html'
_PODMAN_OPTIONS = {
    'run': _PODMAN_RUN, '--rm': _PODMAN_RUN, '--init': _PODMAN_RUN,
    '--network': _PODMAN_RUN, '--ipc': _PODMAN_RUN, '--uts': _PODMAN_RUN,
    '--volume': _PODMAN_RUN, '--workdir': _PODMAN_RUN, '--env': _PODMAN_RUN,
    '--device': _PODMAN_RUN, '--cpu-shares': _PODMAN_RUN,
}
DOCUMENTED = {
    'Apptainer': {'exec': _APPTAINER_EXEC, '-B': _APPTAINER_EXEC,
                  '--pwd': _APPTAINER_EXEC, '--nv': _APPTAINER_GPU,
                  '--rocm': _APPTAINER_GPU},
    'Podman': _PODMAN_OPTIONS,
    'PodmanHPC': {**_PODMAN_OPTIONS, '--gpu': _PODMAN_HPC_GPU},
    'Pyxis': {'--container-image': _PYXIS, '--container-mounts': _PYXIS,
              '--container-workdir': _PYXIS},
    'ContainerEngine': {'--environment': _CE_RUN, 'image': _CE_EDF,
                        'mounts': _CE_EDF, 'workdir': _CE_EDF,
                        'annotations': _CE_EDF},
    'Sarus': {'run': _SARUS_RUN, '--mount': _SARUS_RUN, '-w': _SARUS_RUN},
    'Singularity': {'exec': _SINGULARITY_EXEC, '-B': _SINGULARITY_EXEC,
                    '--pwd': _SINGULARITY_EXEC, '--nv': _SINGULARITY_GPU,
                    '--rocm': _SINGULARITY_GPU},
}

#: The options that give a container a vendor's GPUs, per platform, and
#: where that is documented: a vendor missing from a platform's table has
#: no documented way there. Pyxis (enroot's 98-nvidia.sh hook, from the
#: image's NVIDIA_VISIBLE_DEVICES), CSCS's Container Engine (its CUDA
#: examples run with no GPU setting) and Sarus (its NVIDIA hook, from the
#: job's CUDA_VISIBLE_DEVICES) need no option.
GPU_OPTIONS = {
    'Apptainer': {'nvidia': (['--nv'], _APPTAINER_GPU),
                  'amd': (['--rocm'], _APPTAINER_GPU)},
    'Podman': {'nvidia': (['--device', 'nvidia.com/gpu=all'], _NVIDIA_CDI),
               'amd': (['--device', '/dev/kfd', '--device', '/dev/dri'],
                       _ROCM_DOCKER)},
    'PodmanHPC': {'nvidia': (['--gpu'], _PODMAN_HPC_GPU)},
    'Pyxis': {'nvidia': ([], _ENROOT_HOOKS)},
    'ContainerEngine': {'nvidia': ([], _CE_HOOKS)},
    'Sarus': {'nvidia': ([], _SARUS_GPU)},
    'Singularity': {'nvidia': (['--nv'], _SINGULARITY_GPU),
                    'amd': (['--rocm'], _SINGULARITY_GPU)},
}

#: Variables a container started by Podman (which, unlike the others, does
#: not pass the host's environment) gets from the job besides those the
#: job itself sets: by prefix (``--env 'NAME*'``), the launchers' per-task
#: ids (srun's SLURM_PROCID and SLURMD_NODENAME, HPE PALS', Open MPI's,
#: PMI's: podman-hpc passes ``SLURM_*``, ``PALS_*`` and ``PMI_*`` the same
#: way, its ``shared_run_exec_args`` in podman_hpc/siteconfig.py), the
#: suite's own switches (HPCML_*), and the libraries' tuning a site or user
#: sets (NCCL_*, GLOO_*, TORCH_*, CUDA_*, ...).
PASSED_ENV_PREFIXES = ('SLURM', 'PALS_', 'OMPI_', 'PMI', 'MPI_', 'HPCML_',
                       'NCCL_', 'GLOO_', 'TORCH_', 'PYTORCH_', 'CUDA_', 'HIP_',
                       'ROCR_', 'OMP_', 'TF_', 'XLA_', 'NVIDIA_TF32_',
                       'MALLOC_', 'UCX_', 'FI_')

#: The CPU weight of a Podman container's cgroup: the kernel's largest
#: (cgroup v1 ``cpu.shares``; Podman maps it to cgroup v2's ``cpu.weight``).
#: Rootful Podman puts each container in a cgroup of its own
#: (``libpod_parent/libpod-<id>``) whose default weight, 1024, is one busy
#: thread's: where other work shares the node, all the container's
#: threads together got what one thread of the bare program gets (a rank's
#: compute and communication threads compete each with its own weight).
#: With the largest weight they compete with other work at least as the
#: bare program's would; inside, each still has its own; on a node the job
#: has alone nothing competes and the weight changes nothing.
MAX_CPU_SHARES = 262144

#: Platforms that are options of the job launcher itself (Slurm plugins):
#: they need srun.
SRUN_PLATFORMS = ('Pyxis', 'ContainerEngine')

#: The EDF the Container Engine's jobs write to their stage directory.
EDF_NAME = 'hpcml-container.toml'


@dataclasses.dataclass(frozen=True)
class ContainerRun:
    '''Run *command* (shell words, as the job script writes them) in
    *image*, with *mounts* ((host, container) paths: the job's shell
    expands variables in them), in *workdir*, with the GPUs of
    *gpu_vendor* (``nvidia``, ``amd`` or None), passing *env* (the names
    the job sets) where the runtime does not pass the host's environment;
    *options* are the site's own for the runtime, *annotations* the
    Container Engine's (hooks, e.g. ``com.hooks.aws_ofi_nccl.enabled``);
    *gpu_options*, where not None, the site's options that give the
    container its GPUs in place of the platform's (LUMI's images bring
    their own ROCm and run without ``--rocm``).'''
    image: str
    command: str
    mounts: tuple = ()
    workdir: str = ''
    gpu_vendor: str = None
    env: tuple = ()
    options: tuple = ()
    annotations: tuple = ()
    gpu_options: tuple = None


@dataclasses.dataclass(frozen=True)
class Launch:
    '''How a job starts a :class:`ContainerRun`: the launcher's own
    options, the command it starts, and shell lines before it.'''
    launcher_options: tuple
    command: str
    prepare: tuple = ()


def gpu_options(platform_name, vendor, site=None):
    '''*platform_name*'s options for *vendor*'s GPUs (none without GPUs);
    *site*, where not None, the site's own in their place.'''
    if vendor is None:
        return []
    if site is not None:
        return list(site)
    try:
        return list(GPU_OPTIONS[platform_name][vendor][0])
    except KeyError:
        documented = ', '.join(GPU_OPTIONS.get(platform_name, {})) or 'none'
        raise ContainerError(
            f'{platform_name} has no documented way to give a container '
            f'{vendor.upper()} GPUs (documented: {documented}): choose '
            f"another of the partition's container_platforms") from None


def _words(options):
    return [shlex.quote(o) for o in options]


def _mount_path(path):
    '''*path* for a double-quoted shell word: the job's shell expands its
    variables.'''
    if '"' in path or '\\' in path:
        raise ContainerError(f'mount {path!r}: a path with " or \\ cannot '
                             f'be bind-mounted into a container')
    return path


def podman_launch(run, program='podman'):
    '''``podman run``: removed after the run (``--rm``), a minimal init as
    PID 1 that forwards signals (``--init``: a job's SIGTERM reaches the
    program), the node's network, shared memory and host name (ranks meet
    at the node's addresses, data loaders share /dev/shm, ranks name their
    node), the largest CPU weight (:data:`MAX_CPU_SHARES`), each mount at
    its path, the job's environment by name.'''
    words = [program, 'run', '--rm', '--init', '--network=host',
             '--ipc=host', '--uts=host', f'--cpu-shares={MAX_CPU_SHARES}']
    words += [f'--volume="{_mount_path(h)}:{_mount_path(c)}"'
              for h, c in run.mounts]
    if run.workdir:
        words += ['--workdir', f'"{_mount_path(run.workdir)}"']
    words += [f'--env={name}' for name in run.env]
    words += [f"--env='{prefix}*'" for prefix in PASSED_ENV_PREFIXES]
    name = 'PodmanHPC' if program == 'podman-hpc' else 'Podman'
    words += _words(gpu_options(name, run.gpu_vendor, run.gpu_options))
    words += _words(run.options)
    return Launch((), ' '.join([*words, shlex.quote(run.image),
                                run.command]))


def podman_hpc_launch(run):
    '''NERSC's ``podman-hpc run`` (Podman's options; GPUs: ``--gpu``).'''
    return podman_launch(run, 'podman-hpc')


def pyxis_launch(run):
    '''srun's Pyxis options (the job's environment passes through).'''
    gpu_options('Pyxis', run.gpu_vendor, run.gpu_options)
    options = [f'--container-image={shlex.quote(run.image)}']
    if run.mounts:
        mounts = ','.join(f'{_mount_path(h)}:{_mount_path(c)}'
                          for h, c in run.mounts)
        options.append(f'--container-mounts="{mounts}"')
    if run.workdir:
        options.append(f'--container-workdir="{_mount_path(run.workdir)}"')
    return Launch(tuple(options + _words(run.options)), run.command)


def _toml(value):
    '''A TOML basic string (JSON's escapes are TOML's).'''
    return json.dumps(value)


def edf_text(run):
    '''The Container Engine's EDF of *run* (its environment: the host's,
    which the EDF inherits by default).'''
    lines = [f'image = {_toml(run.image)}']
    if run.mounts:
        mounts = ', '.join(_toml(f'{_mount_path(h)}:{_mount_path(c)}')
                           for h, c in run.mounts)
        lines.append(f'mounts = [{mounts}]')
    if run.workdir:
        lines.append(f'workdir = {_toml(_mount_path(run.workdir))}')
    if run.annotations:
        lines += ['', '[annotations]']
        lines += [f'{key} = {_toml(value)}' for key, value in run.annotations]
    return '\n'.join(lines) + '\n'


def container_engine_launch(run, stagedir):
    '''The EDF, written by the job into *stagedir* (its shell expands the
    mounts' variables there: the EDF's own ${VAR} expansion is a
    technical preview, :data:`_CE_EDF`), and srun's ``--environment``.'''
    gpu_options('ContainerEngine', run.gpu_vendor, run.gpu_options)
    if run.options:
        raise ContainerError(
            "the Container Engine takes no runtime options: put them in "
            "the partition's extras['container_annotations']")
    edf = f'{stagedir}/{EDF_NAME}'
    write = f'cat > "{edf}" <<EOF\n{edf_text(run)}EOF'
    return Launch((f'--environment="{edf}"',), run.command, (write,))


def apptainer_platform(run, platform_class=Apptainer, name='Apptainer'):
    '''ReFrame's Apptainer backend (or its parent, Singularity), given
    *run*.'''
    platform = platform_class()
    platform.options = (gpu_options(name, run.gpu_vendor, run.gpu_options) +
                        list(run.options))
    return platform


def singularity_platform(run):
    '''ReFrame's Singularity backend, given *run*.'''
    return apptainer_platform(run, Singularity, 'Singularity')


def sarus_platform(run):
    '''ReFrame's Sarus backend, given *run* (the image is the site's,
    pulled once: no ``sarus pull`` per job).'''
    gpu_options('Sarus', run.gpu_vendor, run.gpu_options)
    platform = Sarus()
    platform.pull_image = False
    platform.options = list(run.options)
    return platform


class _Described(ContainerPlatform):
    '''A platform whose command comes from a :class:`ContainerRun` here
    (ReFrame runs :meth:`launch_command` and :meth:`emit_prepare_commands`
    when it writes the job script).'''

    def __init__(self, run=None, stagedir=None):
        super().__init__()
        self.run = run
        self.stagedir = stagedir

    def describe(self):
        raise NotImplementedError

    def emit_prepare_commands(self, stagedir):
        return list(self.describe().prepare)

    def launch_command(self, stagedir):
        return self.describe().command


class Podman(_Described):
    def describe(self):
        return podman_launch(self.run)


class PodmanHPC(_Described):
    def describe(self):
        return podman_hpc_launch(self.run)


class Pyxis(_Described):
    def describe(self):
        return pyxis_launch(self.run)


class ContainerEngine(_Described):
    def describe(self):
        return container_engine_launch(self.run, self.stagedir)


#: Each platform's ReFrame object, from a run and its stage directory.
PLATFORMS = {
    'Apptainer': lambda run, stagedir: apptainer_platform(run),
    'Podman': Podman, 'PodmanHPC': PodmanHPC, 'Pyxis': Pyxis,
    'ContainerEngine': ContainerEngine,
    'Sarus': lambda run, stagedir: sarus_platform(run),
    'Singularity': lambda run, stagedir: singularity_platform(run),
}
assert tuple(PLATFORMS) == CONTAINER_PLATFORMS


def platform(name, run, stagedir, launcher):
    '''(ReFrame container platform, launcher options) that start *run*
    with platform *name* under job launcher *launcher* (ReFrame's name).'''
    if name not in PLATFORMS:
        raise ContainerError(f'container platform {name!r} unknown: use one '
                             f'of {", ".join(PLATFORMS)}')
    if name in SRUN_PLATFORMS and launcher != 'srun':
        raise ContainerError(f'{name} is a Slurm plugin: it needs the srun '
                             f"launcher, not {launcher!r}")
    made = PLATFORMS[name](run, stagedir)
    made.image = run.image
    made.command = run.command
    made.workdir = run.workdir or None
    if not isinstance(made, _Described):
        # ReFrame's own backends: the stage directory is among the mounts.
        made.mount_stagedir = None
        made.mount_points = list(run.mounts)
        return made, []
    return made, list(made.describe().launcher_options)
