"""python provenance.py: what a run ran on, as one JSON object on stdout.

Run once per job by src/task_env.sh on the first task, on the compute node
and inside the container when there is one, before the training program:
framework versions from package metadata, and the CUDA or HIP runtime each
framework was built with from its own build files, read as text (nothing
is imported, so this costs a Python start, not a framework import); the
GPU driver from ``nvidia-smi`` (with its "CUDA Version", the newest CUDA
API the *driver* supports, not the runtime any program uses) or ROCm's
``amd-smi`` where present; NCCL's version from its wheel or the image's
environment (the job's log, where NCCL prints the version it loaded, is
read by the check: ``hpctestlib_ml.provenance``); and the environment
switches that change what the numbers mean.
"""
import ast
import json
import os
import re
import shutil
import subprocess
from importlib import metadata, util

#: Distributions whose versions describe every run, by the name logged:
#: the frameworks and NCCL. A workload's own (its declaration's
#: ``packages``: transformers, open-clip-torch, megatron-core, ...) come
#: in ``HPCML_PROVENANCE_PACKAGES``, which its check sets.
PACKAGES = {
    'torch': 'torch',
    'tensorflow': ('tensorflow', 'tensorflow-cpu'),
    'keras': 'keras',
    'nccl': ('nvidia-nccl-cu12', 'nvidia-nccl-cu13'),
}

#: The name a distribution is logged by where it is not its own: the
#: name the perflogs have carried since before the declarations named
#: the packages, so that a history does not see a change of name.
LOGGED_AS = {'open-clip-torch': 'open_clip', 'open_clip_torch': 'open_clip'}


def packages(environ=None):
    '''{name logged: distribution(s)}: :data:`PACKAGES` and those the
    check named in ``HPCML_PROVENANCE_PACKAGES`` (space-separated).'''
    environ = os.environ if environ is None else environ
    named = environ.get('HPCML_PROVENANCE_PACKAGES', '').split()
    return {**PACKAGES, **{LOGGED_AS.get(dist, dist): dist for dist in named}}

#: Environment variables that change the numbers (precision overrides,
#: collective tuning, threads), logged when set.
SWITCHES = (
    'NVIDIA_TF32_OVERRIDE', 'TORCH_ALLOW_TF32_CUBLAS_OVERRIDE',
    'TF_ENABLE_ONEDNN_OPTS', 'TF_XLA_FLAGS', 'XLA_FLAGS',
    'CUDA_DEVICE_MAX_CONNECTIONS', 'NCCL_ALGO', 'NCCL_PROTO',
    'NCCL_IB_DISABLE', 'NCCL_NET_GDR_LEVEL', 'NCCL_SOCKET_IFNAME',
    'GLOO_SOCKET_IFNAME', 'OMP_NUM_THREADS', 'PYTORCH_CUDA_ALLOC_CONF',
    'MALLOC_MMAP_MAX_', 'MALLOC_TRIM_THRESHOLD_', 'LD_PRELOAD',
)


def version(names):
    for name in (names,) if isinstance(names, str) else names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def run(command):
    if not shutil.which(command[0]):
        return ''
    try:
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ''


def _constants(path):
    '''{name: value} of a Python file's top-level assignments of constants
    (``cuda: Optional[str] = '12.8'``), read as text; {} if unreadable.'''
    try:
        tree = ast.parse(open(path).read())
    except (OSError, SyntaxError, ValueError):
        return {}
    found = {}
    for node in tree.body:
        target = (node.targets[0] if isinstance(node, ast.Assign)
                  else getattr(node, 'target', None))
        if isinstance(target, ast.Name) and isinstance(
                getattr(node, 'value', None), ast.Constant):
            found[target.id] = node.value.value
    return found


def _package_dir(name):
    '''The directory of an installed package, without importing it.'''
    try:
        spec = util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return os.path.dirname(spec.origin) if spec and spec.origin else None


def _major_minor(version):
    return '.'.join(re.findall(r'\d+', str(version))[:2])


def torch_runtime():
    '''The GPU runtime torch was built with, from ``torch/version.py``'s
    ``cuda = '12.8'`` / ``hip = '6.2.41133-dd7f95766'``: ``12.8``,
    ``hip 6.2``, ``cpu`` (neither), None without torch.'''
    where = _package_dir('torch')
    if not where:
        return None
    build = _constants(os.path.join(where, 'version.py'))
    if build.get('hip'):
        return f'hip {_major_minor(build["hip"])}'
    return str(build['cuda']) if build.get('cuda') else 'cpu'


def tensorflow_runtime():
    '''The GPU runtime TensorFlow was built with, from
    ``tensorflow/python/platform/build_info.py`` (``('cuda_version',
    '12.3')``, ``('is_rocm_build', True)``): ``12.3``, ``rocm``, ``cpu``,
    None without TensorFlow.'''
    where = _package_dir('tensorflow')
    if not where:
        return None
    try:
        tree = ast.parse(open(os.path.join(
            where, 'python', 'platform', 'build_info.py')).read())
    except (OSError, SyntaxError, ValueError):
        return None
    build = {}
    for node in ast.walk(tree):           # the (key, value) pairs of its dict
        if (isinstance(node, ast.Tuple) and len(node.elts) == 2 and
                all(isinstance(e, ast.Constant) for e in node.elts)):
            build[node.elts[0].value] = node.elts[1].value
    if build.get('is_cuda_build'):
        return str(build.get('cuda_version', 'cuda'))
    if build.get('is_rocm_build'):
        return (f'hip {_major_minor(build["rocm_version"])}'
                if build.get('rocm_version') else 'rocm')
    return 'cpu'


def runtimes():
    '''{framework: runtime it was built with} for those installed.'''
    found = {'torch': torch_runtime(), 'tensorflow': tensorflow_runtime()}
    return {k: v for k, v in found.items() if v}


def gpu_facts():
    '''{'gpu_driver': ..., 'cuda_driver_api': ...} from nvidia-smi (its
    "CUDA Version": the driver's API level), or the ROCm version from
    amd-smi; empty without either.'''
    facts = {}
    text = run(['nvidia-smi'])
    driver = re.search(r'Driver Version:\s*([\d.]+)', text)
    cuda = re.search(r'CUDA Version:\s*([\d.]+)', text)
    if driver:
        facts['gpu_driver'] = driver.group(1)
    if cuda:
        facts['cuda_driver_api'] = cuda.group(1)
    if not facts:
        rocm = re.search(r'ROCm version:\s*([\d.]+)', run(['amd-smi',
                                                           'version']))
        if rocm:
            facts['rocm'] = rocm.group(1)
    return facts


def container():
    '''The image the program runs in, as its runtime says it: Apptainer's
    (and Singularity's) path, else the runtime's name where it sets the
    ``container`` variable systemd's container interface defines (Podman:
    ``podman``); empty outside one.'''
    return (os.environ.get('APPTAINER_CONTAINER') or
            os.environ.get('SINGULARITY_CONTAINER') or
            os.environ.get('container', ''))


def collect():
    versions = {name: v for name, dist in packages().items()
                if (v := version(dist))}
    if 'nccl' not in versions and os.environ.get('NCCL_VERSION'):
        versions['nccl'] = os.environ['NCCL_VERSION']   # NGC images set it
    return {
        'versions': versions,
        'runtimes': runtimes(),
        **gpu_facts(),
        'switches': {k: os.environ[k] for k in SWITCHES if k in os.environ},
        'container': container(),
    }


if __name__ == '__main__':
    print(json.dumps(collect()))
