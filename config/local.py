"""The embedded default: this machine, local scheduler.

``reframe -C config/local.py -c checks -r`` runs the suite here: a ``cpu``
partition always, and a ``gpu`` partition when ``nvidia-smi`` lists GPUs;
the ``*Container`` checks where ``apptainer`` is on PATH.
Jobs use the Python that runs ReFrame (the project's virtual environment).
Everything a run writes goes under ``var/`` in the project (or
``$HPCML_VAR_DIR``).
"""
import os
import platform
import shutil
import subprocess
import sys

from hpctestlib_ml import cpu_peak
from hpctestlib_ml.siteconfig import (CACHE_DIR, container_environment,
                                      local_general, make_site_configuration,
                                      system_dirs, with_apptainer)

#: nvidia-smi product names -> keys of hpctestlib_ml.constants.DEVICE_PEAK_FLOPS
_GPU_MODELS = (('GH200', 'GH200'), ('H200', 'H200'), ('H100 PCIe', 'H100-PCIe'),
               ('H100', 'H100-SXM'), ('A100', 'A100'))


def local_gpus():
    '''(count, model) of this machine's NVIDIA GPUs; (0, None) without any.'''
    if shutil.which('nvidia-smi') is None:
        return 0, None
    try:
        names = subprocess.run(
            ['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'],
            capture_output=True, text=True, timeout=20, check=True
        ).stdout.split('\n')
    except (OSError, subprocess.SubprocessError):
        return 0, None

    names = [n.strip() for n in names if n.strip()]
    model = next((key for pattern, key in _GPU_MODELS
                  if names and pattern in names[0]), None)
    return len(names), model


_num_cpus = os.cpu_count()
_num_gpus, _gpu_model = local_gpus()
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
    },
}

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
        'extras': {'max_nodes': 1, 'rendezvous_address': '127.0.0.1'},
    })

if shutil.which('apptainer'):
    # The *Container checks run here too, on images in containers/.
    _partitions = [with_apptainer(p) for p in _partitions]

site_configuration = make_site_configuration(
    systems=[{
        'name': 'local',
        'descr': f'This machine ({platform.node()})',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        **system_dirs(),
        'partitions': _partitions,
    }],
    environments=[{
        'name': 'python',
        # The suite's .venv has both frameworks (pyproject extras).
        'features': ['torch', 'tensorflow'],
        'env_vars': [['PATH', f'{_python_bin}:$PATH']],
        'target_systems': ['local'],
    }, container_environment('local')],
    general=local_general(),
)
