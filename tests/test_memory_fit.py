"""A case too big for its partition's devices is skipped at setup, with the
numbers, instead of dying out of memory after its time in the queue.

reframe --dry-run (setup runs, no job) on a configuration that says this
machine has one GPU (tests/configs/pretend_gpu.py) of the memory
``HPCML_PRETEND_DEVICE_MEMORY_GIB`` says, and on JUWELS Booster's (A100
40 GB).
"""
import re

import pytest

from conftest import BIN, REPO

pytestmark = pytest.mark.integration

CONFIG = REPO / 'tests' / 'configs' / 'pretend_gpu.py'
CASE = '^MegatronGPT%scale=1_proc%launch_mode=per_task%model_size=800M$'


def dry_run(run_reframe, config, pattern, *options, env=None):
    # This repository's hpctestlib_ml, whichever the environment installs.
    env = {'PYTHONPATH': str(REPO), **(env or {})}
    proc, var = run_reframe(BIN / 'reframe', '-C', config, '-c',
                            REPO / 'checks', '-n', pattern, '--dry-run',
                            *options, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    skips = re.findall(r'SKIP\S*\s*\] \(\s*\d+/\d+\) (\S+) .*?\[(.*)\]$',
                       proc.stdout, re.MULTILINE)
    scripts = list((var / 'stage').rglob('rfm_job.sh'))
    return skips, scripts, var


def test_800m_on_a_16_gib_gpu_is_skipped_with_the_numbers(run_reframe):
    '''CARAML's 800M at micro batch 4 on one GPU of 16 GiB: fp16 weights
    and gradients, fp32 main weights and Adam moments (16 bytes a
    parameter, not sharded at data parallel 1), selectively recomputed
    activations: 27.0 GiB, and the weights and optimizer alone do not
    fit.'''
    skips, scripts, _ = dry_run(
        run_reframe, CONFIG, CASE,
        env={'HPCML_PRETEND_DEVICE_MEMORY_GIB': '16'})
    (name, reason), = skips
    assert name == 'MegatronGPT' and scripts == []
    assert re.match(
        r'needs an estimated 27\.0 GiB per device \(weights 1\.7, '
        r'gradients 1\.7, optimizer 13\.5, activations 10\.1\) at '
        r'TP1xPP1xDP1, micro batch 4, 8 micro-batches, fp16, distributed '
        r'optimizer, selective recomputation', reason), reason
    assert ("the partition's devices have 16.0 GiB (extras"
            "['device_memory_gib']), 14.0 of them for the run") in reason
    assert ('weights, gradients and optimizer state alone need 16.9 GiB'
            in reason)
    assert '-S memory_check=false' in reason


def test_memory_check_false_queues_it_anyway(run_reframe):
    skips, scripts, _ = dry_run(
        run_reframe, CONFIG, CASE, '-S', 'memory_check=false',
        env={'HPCML_PRETEND_DEVICE_MEMORY_GIB': '16'})
    assert skips == [] and len(scripts) == 1


@pytest.mark.parametrize('model, memory, skipped', [
    ('H100-SXM', '', False),     # the table's 80 GiB
    ('A100', '', False),         # 40 or 80 GB: unknown, not skipped
    ('A100', '24', True),
])
def test_device_memory_from_the_table_or_extras(run_reframe, model, memory,
                                                skipped):
    skips, scripts, var = dry_run(
        run_reframe, CONFIG, CASE,
        env={'HPCML_PRETEND_GPU_MODEL': model,
             'HPCML_PRETEND_DEVICE_MEMORY_GIB': memory})
    assert bool(skips) == skipped and len(scripts) == (not skipped)
    if model == 'A100' and not memory:
        log = (var / 'reframe.log').read_text()
        assert "GPU model 'A100' has no known memory size" in log


def test_what_fits_juwels_a100s(run_reframe):
    '''On JUWELS Booster's A100 40 GB (36 GiB for the run), with CARAML's
    options (fp16/bf16 with fp32 main weights, distributed optimizer,
    selective recomputation, sequence parallelism at TP > 1): 800M fits
    at 1 and 16 nodes, 13B at 16 nodes (its optimizer state sharded over
    data parallel 16: 28.6 GiB) but not at 1 (74.3 GiB), 175B not at 16
    nodes (66.1 GiB; jubench runs it on 96); Llama 3 8B at TP 1 (86.4 GiB
    at 16 nodes: 8192-token sequences without sequence parallelism) and
    70B at 16 nodes do not.'''
    skips, scripts, _ = dry_run(
        run_reframe, REPO / 'config' / 'systems' / 'juwels_booster.py',
        '^MegatronGPT%scale=(1_node|16_nodes)%launch_mode=per_task%')
    skipped = {reason.split(' at TP')[1].split(',')[0]: reason
               for _, reason in skips}
    assert set(skipped) == {'2xPP2xDP1', '8xPP8xDP1', '1xPP1xDP4',
                            '1xPP1xDP64', '4xPP8xDP2'}
    assert len(scripts) == 3          # 800M at 1 and 16 nodes, 13B at 16
    assert "devices have 40.0 GiB (extras['device_memory_gib'])" in \
        skipped['8xPP8xDP1']
    assert skipped['8xPP8xDP1'].startswith('needs an estimated 66.1 GiB')


def test_fullsize_800m_on_this_cpu_is_skipped_where_it_cannot_fit(
        run_reframe):
    '''tests/test_fullsize.py's Megatron case (800M, fp32, micro batch 1,
    CARAML's selective recomputation: 23.1 GiB resident on a CPU, the
    kernel killed it in its second iteration on the 24 GiB VM) on the
    local CPU partition, whose ranks share the host's MemTotal
    (config/local.py): skipped with the numbers where that is too small,
    queued where not.'''
    import importlib.util
    from hpctestlib_ml import memory_estimate as me
    # config/local.py by its path: putting config/ on sys.path would make
    # its slurm.py shadow the tests' own slurm package for later tests.
    spec = importlib.util.spec_from_file_location(
        'hpcml_local_config', REPO / 'config' / 'local.py')
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    host_memory_gib = local.host_memory_gib
    skips, scripts, _ = dry_run(
        run_reframe, REPO / 'config' / 'local.py', CASE, '--mode', 'short',
        '-S', 'steps=2', '-S', 'batch_size=1', '-S', 'global_batch_size=1')
    host = host_memory_gib()
    if me.usable_gib(host) < 23.1:
        (_, reason), = skips
        assert ('at TP1xPP1xDP1, micro batch 1, 1 micro-batches, fp32'
                in reason), reason
        assert (f"the partition's devices have {host:.1f} GiB (the node's "
                f"{host:.1f} GiB (extras['device_memory_gib']) shared by 1 "
                f"rank(s))") in reason
    else:
        assert skips == [] and len(scripts) == 1
