"""The embedded default: this machine, local scheduler.

``reframe -C config/local.py -c checks -r`` runs the suite here: a ``cpu``
partition always, and a ``gpu`` partition when ``nvidia-smi`` (or, for AMD
GPUs, ``amd-smi``/``rocm-smi``) lists GPUs;
the ``*Container`` checks with Podman where ``podman`` is on PATH and
its storage holds the suite's image (``make image``; or
``HPCML_CONTAINER_IMAGE``), else with Apptainer where ``apptainer`` is
(:func:`hpctestlib_ml.siteconfig.local_container_platform`).
Jobs use the Python that runs ReFrame (the project's virtual environment).
Everything a run writes goes under ``var/`` in the project (or
``$HPCML_VAR_DIR``); the Storage component measures the stage directory
there, or ``$HPCML_STORAGE_DIR`` (``extras['storage_dir']`` of both
partitions: e.g. a scratch file system mounted here).
"""
import os
import platform
import re
import shutil
import subprocess
import sys

from hpctestlib_ml import cpu_peak, peaks, tensorflow_build
from hpctestlib_ml.paths import CACHE_DIR
from hpctestlib_ml.siteconfig import (container_environment, local_general,
                                      local_container_platform,
                                      make_site_configuration, system_dirs,
                                      with_container_platform)

#: The product name in ``amd-smi static --asic`` (``MARKET_NAME: AMD
#: Instinct MI300X``) and ``rocm-smi --showproductname`` (``GPU[0] : Card
#: Series: AMD Instinct MI300X``): one line per GPU.
_AMD_PRODUCT = re.compile(r'(?:MARKET_NAME|Card [Ss]eries)\s*:\s*(.+)')


def _run(command):
    '''*command*'s output, or None where it is missing or fails.'''
    if shutil.which(command[0]) is None:
        return None
    try:
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _model(names):
    '''The peak table's key of the first GPU's product name
    (:func:`hpctestlib_ml.peaks.model_key`).'''
    return peaks.model_key(names[0]) if names else None


def local_gpus():
    '''(count, model, vendor) of this machine's GPUs: NVIDIA's from
    nvidia-smi, else AMD's from amd-smi or rocm-smi; (0, None, None)
    without any.'''
    text = _run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'])
    names = [n.strip() for n in (text or '').split('\n') if n.strip()]
    if names:
        return len(names), _model(names), 'nvidia'
    for command in (['amd-smi', 'static', '--asic'],
                    ['rocm-smi', '--showproductname']):
        names = [n.strip() for n in _AMD_PRODUCT.findall(_run(command) or '')]
        if names:
            return len(names), _model(names), 'amd'
    return 0, None, None


def local_gpu_memory_gib():
    '''GiB of memory of this machine's smallest NVIDIA GPU (nvidia-smi's
    memory.total); None without one, or where it says none.'''
    text = _run(['nvidia-smi', '--query-gpu=memory.total',
                 '--format=csv,noheader,nounits'])
    sizes = []
    for line in (text or '').split('\n'):
        try:
            sizes.append(float(line.strip()) / 1024)
        except ValueError:
            pass
    return min(sizes) if sizes else None


def host_memory_gib():
    '''GiB of this machine's memory (MemTotal of /proc/meminfo): the CPU
    partition's "device" memory, shared by the ranks of a case; None
    where it cannot be read.'''
    try:
        with open('/proc/meminfo') as fp:
            for line in fp:
                if line.startswith('MemTotal:'):
                    return int(line.split()[1]) / 2 ** 20
    except (OSError, ValueError, IndexError):
        pass
    return None


_num_cpus = os.cpu_count()
_num_gpus, _gpu_model, _gpu_vendor = local_gpus()
_python_bin = os.path.dirname(sys.executable)

_cpu_partition = {
    'name': 'cpu',
    'descr': f'{_num_cpus} CPUs of this machine',
    'scheduler': 'local',
    'launcher': 'local',
    'environs': ['python'],
    # One job at a time: concurrent jobs would share these CPUs and
    # distort every figure.
    'max_jobs': 1,
    'processor': {'num_cpus': _num_cpus},
    'features': ['cpu'],
    'extras': {
        'max_nodes': 1,
        'scales': ['1_proc', '2_procs'],
        'rendezvous_address': '127.0.0.1',
        'cpu_peak_flops': cpu_peak.cached_peak(CACHE_DIR, _num_cpus),
        # What a case's ranks share: the fit check skips a case that
        # needs more (hpctestlib_ml.memory_estimate).
        **({'device_memory_gib': _host_memory}
           if (_host_memory := host_memory_gib()) else {}),
    },
}

#: Where the Storage component reads and writes: the stage directory
#: unless HPCML_STORAGE_DIR names another.
_storage = ({'storage_dir': os.environ['HPCML_STORAGE_DIR']}
            if os.environ.get('HPCML_STORAGE_DIR') else {})
_cpu_partition['extras'].update(_storage)

_partitions = [_cpu_partition]
if _num_gpus:
    _partitions.append({
        'name': 'gpu',
        'descr': f'{_num_gpus} x {_gpu_model or "GPU"} of this machine',
        'scheduler': 'local',
        'launcher': 'local',
        'environs': ['python'],
        'max_jobs': 1,
        'processor': {'num_cpus': _num_cpus},
        'devices': [{'type': 'gpu', 'num_devices': _num_gpus,
                     **({'model': _gpu_model} if _gpu_model else {})}],
        'features': ['gpu'],
        'extras': {'max_nodes': 1, 'rendezvous_address': '127.0.0.1',
                   'gpu_vendor': _gpu_vendor, **_storage,
                   **({'device_memory_gib': _gpu_memory}
                      if (_gpu_memory := local_gpu_memory_gib()) else {})},
    })

_container_platform, _container_images = local_container_platform()
if _container_platform:
    # The *Container checks run here too.
    _partitions = [with_container_platform(p, _container_platform,
                                           _container_images)
                   for p in _partitions]

_python_environment = {
    'name': 'python',
    # The suite's .venv has both frameworks (pyproject extras).
    'features': ['torch', 'tensorflow'],
    'env_vars': [['PATH', f'{_python_bin}:$PATH']],
    'target_systems': ['local'],
}
# On the gpu partition, TensorFlow only where its build computes on these
# GPUs: the default extra installs tensorflow-cpu, with which ResNet50TF's
# benchmark size would train on the CPU.
_gpu_python_environment = {
    **_python_environment, 'target_systems': ['local:gpu'],
    'features': ['torch'] + (['tensorflow'] if tensorflow_build.drives(
        _gpu_vendor) else []),
}

site_configuration = make_site_configuration(
    systems=[{
        'name': 'local',
        'descr': f'This machine ({platform.node()})',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        **system_dirs(),
        'partitions': _partitions,
    }],
    environments=[_python_environment, _gpu_python_environment,
                  container_environment('local')],
    general=local_general(),
)
