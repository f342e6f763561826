"""The Storage component: the formats it writes are those the workloads'
programs read (read back by their own readers), the page cache is dropped
before a read, the checkpoint's size comes from the registry, the program
on this CPU with 1 and 2 ranks, and its parser's aggregate (bytes over the
slowest rank's time) and per-rank rates."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, run_module
from hpctestlib_ml import state_size
from hpctestlib_ml.parsers import storage_bench as parser

sys.path.insert(0, str(REPO / 'src'))
import storage_bench as sb  # noqa: E402

TINY = sb.SAMPLES['tiny']


def written(tmp_path, fmt, count=2):
    directory = tmp_path / fmt
    directory.mkdir()
    sb.WRITERS[fmt](str(directory), TINY, count, np.random.default_rng(0))
    return directory


def test_cosmoflows_program_reads_the_npy_samples(tmp_path):
    import torch
    from cosmoflow.__main__ import from_files, sample_files
    files, total = sample_files(written(tmp_path, 'npy'), 0, 1)
    assert total == 2
    cubes, targets = next(from_files(files, 2, TINY['cube'],
                                     torch.Generator().manual_seed(0)))
    assert cubes.shape == (2, 4, 32, 32, 32) and targets.shape == (2, 4)


def test_deepcams_program_reads_the_npz_samples(tmp_path):
    import torch
    from deepcam.__main__ import from_files, sample_files
    files, _ = sample_files(written(tmp_path, 'npz'), 0, 1)
    data, labels = next(from_files(files, 2,
                                   torch.Generator().manual_seed(0)))
    assert data.shape == (2, 16, 128, 192) and labels.shape == (2, 128, 192)


def test_tfrecord_shards_are_framed_as_tfrecords(tmp_path):
    '''Length (uint64), its CRC, the record, its CRC: the frames
    TFRecordDataset walks (the CRCs are zeros: not checked here).'''
    shard = next(written(tmp_path, 'tfrecord', 1).iterdir())
    assert shard.name == 'train-00000-of-00001'
    frame = 12 + TINY['record_bytes'] + 4
    assert shard.stat().st_size == TINY['shard_records'] * frame
    head = shard.read_bytes()[:8]
    assert int.from_bytes(head, 'little') == TINY['record_bytes']


def test_text_is_lines(tmp_path):
    text = (written(tmp_path, 'text', 1) / 'train.txt').read_text()
    lines = text.splitlines()
    assert len(text) == 2 ** 20 and len(lines) > 10000
    assert max(len(line) for line in lines) <= TINY['line_chars']


@pytest.mark.parametrize('fmt', sb.FORMATS)
def test_every_file_is_read_whole(tmp_path, fmt):
    directory = written(tmp_path, fmt)
    paths = sorted(str(p) for p in directory.iterdir())
    assert sb.read_all(fmt, paths) == sum(os.path.getsize(p) for p in paths)


def test_the_page_cache_is_dropped_where_the_system_can(tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'x' * 4096)
    assert sb.drop_cache(str(path)) is hasattr(os, 'posix_fadvise')


def test_checkpoint_is_the_registrys_model_and_optimizer(tmp_path):
    '''Megatron 800M (908,759,040 parameters, the count on
    docs/workloads/megatron.md) with Adam: parameters and two moments in
    fp32, 12 bytes a parameter.'''
    (tmp_path / 'model_params.json').write_text(
        '{"megatron|800M": {"params": 908759040}}')
    total, what = state_size.checkpoint_bytes('megatron', '800M', tmp_path)
    assert total == 908_759_040 * 12 == 10_905_108_480
    assert what == ('megatron 800M: 908,759,040 parameters + adam state, '
                    'fp32')
    assert state_size.state_bytes(10, 'sgd_momentum') == 80


#: torch as a GPU node shows it to a program that asks (a stand-in: no
#: GPU here). A model built on the meta device must not need more: any
#: CUDA call then fails, as it would create a CUDA context on a login node.
GPU_NODE_STAND_IN = ('import torch\n'
                     'torch.cuda.is_available = lambda: True\n')


def test_checkpoint_size_on_a_gpu_node(tmp_path):
    '''Storage's checkpoint on a GPU partition: Megatron 800M counted by
    hpcml model-info in a child with CUDA present. On an H100 the meta
    build ran Megatron-Core's attention dropout under the CUDA RNG
    tracker that nothing had seeded ("cuda rng state model-parallel-rng is
    not added"); the count is the CPU's.'''
    stand_in = tmp_path / 'gpu_node'
    stand_in.mkdir()
    (stand_in / 'sitecustomize.py').write_text(GPU_NODE_STAND_IN)
    env = {**os.environ,
           'PYTHONPATH': os.pathsep.join([str(stand_in), str(REPO)])}
    code = ('import sys, torch; from hpctestlib_ml import state_size\n'
            'assert torch.cuda.is_available()\n'
            'print(state_size.checkpoint_bytes("megatron", "800M", '
            'sys.argv[1])[0])')
    proc = subprocess.run([sys.executable, '-c', code, str(tmp_path)],
                          env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [str(908_759_040 * 12)]


#: The end of hpcml model-info's stderr on the H100 (torchrun-style
#: labels: the model-info child runs a one-rank process group).
H100_MODEL_INFO_STDERR = (
    "[rank0]: Traceback (most recent call last):\n"
    + "[rank0]:   File \"megatron/core/transformer/module.py\", line 352, "
      "in __call__\n[rank0]:     return super().__call__(*args, **kwargs)"
      "\n" * 12 +
    "[rank0]:   File \"megatron/core/transformer/dot_product_attention.py"
    "\", line 203, in forward\n"
    "[rank0]:     with tensor_parallel.get_cuda_rng_tracker().fork():\n"
    "[rank0]:   File \"megatron/core/tensor_parallel/random.py\", line "
    "248, in fork\n"
    "[rank0]:     raise Exception('cuda rng state {} is not added'.format("
    "name))\n"
    "[rank0]: Exception: cuda rng state model-parallel-rng is not added\n")


def test_a_failed_count_is_said_by_its_exception(tmp_path, monkeypatch):
    '''The reason quotes the child's decisive line, whole, not the last
    500 characters of its stderr (on the H100: "failed: ward" and a
    traceback's tail).'''
    def failed(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1, '',
                                           H100_MODEL_INFO_STDERR)
    monkeypatch.setattr(state_size.subprocess, 'run', failed)
    with pytest.raises(state_size.StateSizeError) as err:
        state_size.checkpoint_bytes('megatron', '800M', tmp_path)
    assert str(err.value) == (
        'hpcml model-info megatron --size 800M failed: Exception: cuda rng '
        'state model-parallel-rng is not added')


def test_parser_aggregates_over_the_slowest_rank():
    line = ('[storage_bench] rank {} round {} op read_npy bytes {} seconds '
            '{} files 1 writer 0 cache fadvise\n')
    gb2 = 2_000_000_000
    text = (line.format(0, 0, gb2, 1.0) + line.format(1, 0, gb2, 2.0) +
            line.format(0, 1, gb2, 1.0) + line.format(1, 1, gb2, 1.0))
    log = parser.training_log(text)
    # Round 0: 4 GB over 2 s; round 1: 4 GB over 1 s.
    assert log.figures['read_npy_GBps'] == pytest.approx((2 + 4) / 2)
    # Round 0: ranks at 2 and 1 GB/s; round 1: both at 2.
    assert log.figures['read_npy_GBps_per_rank'] == pytest.approx(1.75)
    assert log.steps == 2 and log.world_size == 2
    assert log.figures['read_npy_cache'] == 'fadvise'


def check_own_log(text, world):
    log = parser.training_log(text)
    assert log.world_size == world and log.steps == 2
    assert log.figures['operations'] == [f'read_{f}' for f in sb.FORMATS] \
        + ['checkpoint_write', 'checkpoint_read']
    for op in log.figures['operations']:
        assert log.figures[f'{op}_GBps'] > 0
        if op != 'checkpoint_write':
            assert log.figures[f'{op}_cache'] == 'fadvise'
    # The checkpoint is shared: every rank writes its part.
    assert log.figures['checkpoint_write_bytes'] == pytest.approx(
        8_000_000, rel=0.01)
    return log


@pytest.mark.parametrize('procs', [1, 2])
def test_the_program_on_cpu_ranks(tmp_path, procs):
    proc = run_module(tmp_path, 'storage_bench', '--cpu', '--dir', tmp_path,
                      '--size', 'tiny', '--bytes-per-rank', 2 ** 20,
                      '--checkpoint-bytes', 8_000_000, '--rounds', 2,
                      procs=procs)
    check_own_log(proc.stdout, procs)
    # Its directory is gone.
    assert not [p for p in tmp_path.iterdir()
                if p.name.startswith('hpcml-storage-')]


def test_a_directory_that_is_not_there_says_where_to_set_it(tmp_path):
    import subprocess
    proc = subprocess.run(
        [sys.executable, '-m', 'storage_bench', '--dir', str(tmp_path / 'x')],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src')},
        capture_output=True, text=True)
    assert proc.returncode == 2
    assert "extras['storage_dir'] or -S storage_dir=" in proc.stderr


def test_storage_ranks_on_a_gpu_node_use_gloo_and_no_cuda_context(
        monkeypatch):
    '''storage_bench's start on a 4-GPU node (torch's GPU calls stood in
    for): its collectives are barriers, so Gloo, not NCCL, and no
    torch.cuda.set_device (a CUDA context per rank); the device record
    still names the rank's GPU.'''
    import torch
    import torch_device
    calls = {}
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 4)
    monkeypatch.setattr(torch.cuda, 'set_device',
                        lambda index: calls.setdefault('set_device', index))
    monkeypatch.setattr(torch_device, 'init_process_group',
                        lambda backend, env: calls.setdefault('backend',
                                                              backend))
    monkeypatch.setattr(torch_device, 'capability', lambda device: (9, 0))
    monkeypatch.setattr(torch_device, 'emit_device',
                        lambda device, rank: calls.setdefault('record',
                                                              device))
    monkeypatch.setattr(torch.distributed, 'get_rank', lambda: 1)
    env = {'WORLD_SIZE': '4', 'LOCAL_RANK': '1', 'LOCAL_WORLD_SIZE': '4'}
    rank, world, device = torch_device.start_ranks(env=env, computes=False)
    assert (rank, world, device) == (1, 4, torch.device('cuda', 1))
    assert calls == {'backend': 'gloo', 'record': torch.device('cuda', 1)}
    # A program that computes keeps NCCL and its current device.
    calls.clear()
    torch_device.start_ranks(env=env, math_mode=False)
    assert calls['backend'] == 'nccl' and calls['set_device'] == 1


def test_the_storage_program_starts_its_ranks_without_computing(
        monkeypatch, tmp_path):
    import torch_device
    from storage_bench.__main__ import main
    asked = {}

    class Started(Exception):
        pass

    def start_ranks(**kwargs):
        asked.update(kwargs)
        raise Started
    monkeypatch.setattr(torch_device, 'start_ranks', start_ranks)
    with pytest.raises(Started):
        main(['--dir', str(tmp_path)])
    assert asked['computes'] is False


def test_the_storage_check_logs_no_gpu_memory():
    # Nor does any other check's GPU case miss it.
    from hpctestlib_ml.workloads.matmul_rate import MatmulRateBenchmark
    from hpctestlib_ml.workloads.storage import StorageBenchmark
    assert StorageBenchmark.reports_gpu_memory is False
    assert MatmulRateBenchmark.reports_gpu_memory is True
