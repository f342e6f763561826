"""Provenance of a job (src/provenance.py on the node, then
hpctestlib_ml/provenance.py in the check): the CUDA or HIP runtime the
framework was built with, read from its build files without importing it,
is the run's ``cuda_version``; nvidia-smi's "CUDA Version" (the driver's
API level) goes with the driver; NCCL's version and transport come from
its own log lines. The node is faked: a torch package whose import fails
(so reading it must not import it), and an nvidia-smi that prints a real
one's output (tests/data/provenance/SOURCES.md)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import DATA, REPO, read_data
from hpctestlib_ml import provenance

TORCH_VERSION_PY = '''from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '{version}'
debug = False
cuda: Optional[str] = {cuda!r}
git_version = '5c4886908584029761b579af026dcfb627c84070'
hip: Optional[str] = {hip!r}
rocm: Optional[str] = None
xpu: Optional[str] = None
'''

TF_BUILD_INFO_PY = '''"""Auto-generated module providing information about the build."""
import collections

build_info = collections.OrderedDict([{pairs}])
'''


def fake_node(tmp_path, cuda='12.8', hip=None, tf_build=None):
    '''A site directory with a torch (and a tensorflow) that cannot be
    imported, and a bin directory with nvidia-smi; (pythonpath, path).'''
    site = tmp_path / 'site'
    (site / 'torch').mkdir(parents=True)
    (site / 'torch' / '__init__.py').write_text(
        'raise RuntimeError("provenance imported torch")\n')
    (site / 'torch' / 'version.py').write_text(TORCH_VERSION_PY.format(
        version='2.11.0', cuda=cuda, hip=hip))
    if tf_build is not None:
        platform = site / 'tensorflow' / 'python' / 'platform'
        platform.mkdir(parents=True)
        (site / 'tensorflow' / '__init__.py').write_text(
            'raise RuntimeError("provenance imported tensorflow")\n')
        (platform / 'build_info.py').write_text(
            TF_BUILD_INFO_PY.format(pairs=tf_build))
    bin_ = tmp_path / 'bin'
    bin_.mkdir()
    smi = bin_ / 'nvidia-smi'
    output = DATA / 'provenance' / 'nvidia-smi_550.40.07.txt'
    smi.write_text(f'#!/bin/sh\ncat {output}\n')
    smi.chmod(0o755)
    return str(site), f'{bin_}:{os.environ["PATH"]}'


def job(tmp_path, **node):
    '''Run src/provenance.py on the fake node as task_env.sh does; the
    stage directory it wrote hpcml_provenance.json into.'''
    pythonpath, path = fake_node(tmp_path, **node)
    stage = tmp_path / 'stage'
    stage.mkdir()
    with open(stage / provenance.PROVENANCE_FILE, 'w') as out:
        subprocess.run([sys.executable, REPO / 'src/provenance.py'],
                       env={**os.environ, 'PYTHONPATH': pythonpath,
                            'PATH': path},
                       stdout=out, check=True, timeout=60)
    return stage


def test_cuda_version_is_the_frameworks_runtime_not_the_drivers(tmp_path):
    stage = job(tmp_path, cuda='12.8')
    facts = provenance.job_provenance(stage)
    # Before: cuda_version 12.4 (nvidia-smi's), the driver alone.
    assert facts['cuda_version'] == '12.8'
    assert facts['gpu_driver'] == '550.40.07 (CUDA 12.4)'
    written = json.loads((stage / provenance.PROVENANCE_FILE).read_text())
    assert written['runtimes']['torch'] == '12.8'
    assert written['cuda_driver_api'] == '12.4'


def test_rocm_and_cpu_builds_of_torch(tmp_path):
    assert provenance.job_provenance(job(
        tmp_path / 'rocm', cuda=None, hip='6.2.41133-dd7f95766'))[
            'cuda_version'] == 'hip 6.2'
    assert provenance.job_provenance(job(
        tmp_path / 'cpu', cuda=None, hip=None))['cuda_version'] == 'cpu'


def test_tensorflow_checks_get_tensorflows_runtime(tmp_path):
    stage = job(tmp_path, cuda='12.8', tf_build=(
        "('cpu_compiler', '/usr/lib/llvm-17/bin/clang'), "
        "('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', "
        "'sm_89', 'compute_90']), ('cuda_version', '12.3'), "
        "('cudnn_version', '8'), ('is_cuda_build', True), "
        "('is_rocm_build', False), ('is_tensorrt_build', True)"))
    assert provenance.job_provenance(
        stage, framework='tensorflow')['cuda_version'] == '12.3'
    assert provenance.job_provenance(stage)['cuda_version'] == '12.8'


def test_nccl_version_and_transport_from_the_job_log(tmp_path):
    stage = tmp_path
    (stage / provenance.PROVENANCE_FILE).write_text(json.dumps(
        {'versions': {'torch': '2.11.0', 'nccl': '2.21.5'}}))
    # The wheel's version where the log has nothing of NCCL's.
    assert provenance.job_provenance(stage)['nccl_version'] == '2.21.5'
    # What the processes loaded and chose, where NCCL logged it.
    assert provenance.job_provenance(
        stage, log_text=read_data('nccl', 'roce_nccl-tests_185.log'))[
            'nccl_version'] == '2.19.3 (IB)'
    # A module-based site: no wheel, no NCCL_VERSION; a socket fallback.
    (stage / provenance.PROVENANCE_FILE).write_text('{}')
    assert provenance.job_provenance(stage, log_text=read_data(
        'nccl', 'socket_no_verbs_nccl-tests_166.log'))['nccl_version'] == \
        '2.18.3 (Socket)'
    assert provenance.job_provenance(stage, log_text=read_data(
        'nccl', 'socket_ib_disabled_nccl-tests_188.log'))['nccl_version'] == \
        'unknown (Socket)'


@pytest.mark.parametrize('facts, driver', [
    ({'gpu_driver': '550.40.07', 'cuda_driver_api': '12.4'},
     '550.40.07 (CUDA 12.4)'),
    ({'rocm': '6.2.0'}, 'ROCm 6.2.0'),
    ({}, ''),
])
def test_driver_field(tmp_path, facts, driver):
    (tmp_path / provenance.PROVENANCE_FILE).write_text(json.dumps(facts))
    assert provenance.job_provenance(tmp_path)['gpu_driver'] == driver


def test_nccl_the_ranks_loaded_stands_in_for_a_missing_log_line(tmp_path):
    '''One GPU: NCCL never starts, so its log has no version line; the
    ranks' device records say which NCCL torch loaded, over the wheel's
    metadata (an NGC image's NCCL is no wheel).'''
    from hpctestlib_ml import provenance
    (tmp_path / provenance.PROVENANCE_FILE).write_text(
        '{"versions": {"nccl": "2.26.2"}}')
    assert provenance.job_provenance(
        tmp_path, log_text='', loaded_nccl='2.27.3')['nccl_version'] == \
        '2.27.3'
    assert provenance.job_provenance(tmp_path)['nccl_version'] == '2.26.2'


def test_a_workloads_declared_packages_are_the_ones_its_runs_log(tmp_path):
    '''src/provenance.py kept its own list, so accelerate, datasets and
    mlperf-logging (GPT-2's and BERT's packages) went unlogged, and so
    did a new workload's (the architecture reading's timm). The check
    names its declaration's packages in HPCML_PROVENANCE_PACKAGES and
    the job logs their versions, OpenCLIP's under the name the perflogs
    have carried (under 1 s: one Python process).'''
    from hpctestlib_ml import registry
    from importlib import metadata
    assert registry.get('gpt2_finetune').logged_packages == (
        'transformers', 'accelerate', 'datasets')
    assert registry.get('clip').logged_packages == ('open-clip-torch',)
    named = ' '.join(registry.get('gpt2_finetune').logged_packages +
                     registry.get('bert').logged_packages +
                     registry.get('clip').logged_packages)
    out = subprocess.run([sys.executable, REPO / 'src/provenance.py'],
                         env={**os.environ,
                              'HPCML_PROVENANCE_PACKAGES': named},
                         capture_output=True, text=True, check=True,
                         timeout=60)
    versions = json.loads(out.stdout)['versions']
    for name, dist in [('accelerate', 'accelerate'),
                       ('datasets', 'datasets'),
                       ('mlperf-logging', 'mlperf-logging'),
                       ('transformers', 'transformers'),
                       ('open_clip', 'open_clip_torch')]:
        assert versions[name] == metadata.version(dist), (name, versions)
    # Without the variable: the framework's alone.
    out = subprocess.run([sys.executable, REPO / 'src/provenance.py'],
                         env={k: v for k, v in os.environ.items()
                              if k != 'HPCML_PROVENANCE_PACKAGES'},
                         capture_output=True, text=True, check=True,
                         timeout=60)
    assert 'accelerate' not in json.loads(out.stdout)['versions']
