"""python provenance.py: what a run ran on, as one JSON object on stdout.

Run once per job by src/task_env.sh on the first task, on the compute node
and inside the container when there is one, before the training program:
framework versions from package metadata (nothing is imported, so this
costs a Python start, not a framework import), the GPU driver and CUDA
version from ``nvidia-smi`` or ROCm's ``amd-smi``/``rocm-smi`` where
present, NCCL's version from its wheel or the image's environment, and the
environment switches that change what the numbers mean.
"""
import json
import os
import re
import shutil
import subprocess
from importlib import metadata

#: Distributions whose versions describe a run, by the name logged.
PACKAGES = {
    'torch': 'torch',
    'tensorflow': ('tensorflow', 'tensorflow-cpu'),
    'keras': 'keras',
    'transformers': 'transformers',
    'open_clip': 'open_clip_torch',
    'megatron-core': 'megatron-core',
    'nccl': ('nvidia-nccl-cu12', 'nvidia-nccl-cu13'),
}

#: Environment variables that change the numbers (precision overrides,
#: collective tuning, threads), logged when set.
SWITCHES = (
    'NVIDIA_TF32_OVERRIDE', 'TORCH_ALLOW_TF32_CUBLAS_OVERRIDE',
    'TF_ENABLE_ONEDNN_OPTS', 'TF_XLA_FLAGS', 'XLA_FLAGS',
    'CUDA_DEVICE_MAX_CONNECTIONS', 'NCCL_ALGO', 'NCCL_PROTO',
    'NCCL_IB_DISABLE', 'NCCL_NET_GDR_LEVEL', 'NCCL_SOCKET_IFNAME',
    'GLOO_SOCKET_IFNAME', 'OMP_NUM_THREADS', 'PYTORCH_CUDA_ALLOC_CONF',
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


def gpu_facts():
    '''{'gpu_driver': ..., 'cuda': ...} from nvidia-smi, or the ROCm
    version from amd-smi; empty without either.'''
    facts = {}
    text = run(['nvidia-smi'])
    driver = re.search(r'Driver Version:\s*([\d.]+)', text)
    cuda = re.search(r'CUDA Version:\s*([\d.]+)', text)
    if driver:
        facts['gpu_driver'] = driver.group(1)
    if cuda:
        facts['cuda'] = cuda.group(1)
    if not facts:
        rocm = re.search(r'ROCm version:\s*([\d.]+)', run(['amd-smi',
                                                           'version']))
        if rocm:
            facts['rocm'] = rocm.group(1)
    return facts


def collect():
    versions = {name: v for name, dist in PACKAGES.items()
                if (v := version(dist))}
    if 'nccl' not in versions and os.environ.get('NCCL_VERSION'):
        versions['nccl'] = os.environ['NCCL_VERSION']   # NGC images set it
    return {
        'versions': versions,
        **gpu_facts(),
        'switches': {k: os.environ[k] for k in SWITCHES if k in os.environ},
        'container': os.environ.get('APPTAINER_CONTAINER',
                                    os.environ.get('SINGULARITY_CONTAINER',
                                                   '')),
    }


if __name__ == '__main__':
    print(json.dumps(collect()))
