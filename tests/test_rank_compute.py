"""Each rank's own compute per step (``src/rank_compute.py``), the
``[hpcml] rank_compute`` record, and the slowest rank the check names
from it (:mod:`hpctestlib_ml.device_check`).

The measure must leave a fast rank's figure free of the time it waits for
a slow one: two real ranks under DDP (Gloo), one of them slowed inside or
before its forward pass.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO
from hpctestlib_ml import device_check
from hpctestlib_ml.parsers import hpcml_records

sys.path.insert(0, str(REPO / 'src'))

SLEEP = 0.2


def test_forward_timer_sums_a_step_s_forwards_and_forgets_the_warmup():
    import torch

    import rank_compute

    class Slow(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.01)
            return x

    model = Slow()
    timer = rank_compute.ForwardTimer(model, torch.device('cpu'))
    model(torch.ones(1))
    timer.step_done()
    timer.discard()                                 # the warm-up step
    for forwards in (1, 2, 3):
        for _ in range(forwards):                   # accumulation
            model(torch.ones(1))
        timer.step_done()
    seconds = timer.seconds()
    assert len(seconds) == 3
    for forwards, took in zip((1, 2, 3), seconds):
        assert 0.01 * forwards <= took < 0.01 * forwards + 0.2


def test_on_a_gpu_the_forward_is_timed_by_cuda_events(monkeypatch):
    '''CUDA events on the current stream, read (milliseconds) once the
    steps are over: no synchronisation inside the step. Here a stand-in
    for torch.cuda.Event (no GPU on CI) that keeps the host's time.'''
    import torch

    import rank_compute

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.at = None

        def record(self):
            self.at = time.perf_counter()

        def elapsed_time(self, end):
            return 1e3 * (end.at - self.at)

    class Slow(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.02)
            return x

    monkeypatch.setattr(torch.cuda, 'Event', Event)
    model = Slow()
    timer = rank_compute.ForwardTimer(model, torch.device('cuda', 0))
    model(torch.ones(1))
    timer.step_done()
    took, = timer.seconds()
    assert 0.02 <= took < 0.2


def test_record_fields():
    import rank_compute
    record = rank_compute.facts(3, [0.1, 0.2, 0.6], node='n2')
    assert record == {'rank': 3, 'node': 'n2', 'measure': 'forward',
                      'steps': 3, 'mean_s': 0.3, 'median_s': 0.2,
                      'max_s': 0.6}
    assert rank_compute.facts(0, []) is None


def records(*means):
    return [{'rank': i, 'node': f'n{i + 1}', 'mean_s': m}
            for i, m in enumerate(means)]


def test_spread_is_the_slowest_rank_over_the_median_rank():
    spread, slowest = device_check.rank_compute_spread(
        records(1.0, 1.0, 1.0, 1.27))
    assert spread == pytest.approx(27)
    assert slowest['node'] == 'n4'
    assert device_check.slowest_rank(records(1.0, 1.0, 1.0, 1.27),
                                     noise_pct=20) == 'rank 3 on n4, +27 %'


def test_no_slowest_rank_within_the_noise_or_with_one_rank():
    noise = device_check.RANK_SPREAD_NOISE_PCT
    within = 1 + noise / 100 * 0.9
    assert device_check.slowest_rank(records(1.0, within)) == ''
    assert device_check.slowest_rank(records(1.0)) == ''
    # One rank is its own median: spread 0, logged like any case's.
    assert device_check.rank_compute_spread(records(1.0))[0] == 0
    assert device_check.rank_compute_spread([]) is None
    assert device_check.slowest_rank([]) == ''


def test_records_are_parsed():
    text = ('[hpcml] rank_compute {"rank": 1, "node": "n2", "mean_s": 0.5}\n'
            '1: [hpcml] rank_compute {"rank": 0, "node": "n1", '
            '"mean_s": 0.1}\n')
    assert [r['rank'] for r in hpcml_records.records(
        text, 'rank_compute')] == [1, 0]


DDP_SCRIPT = '''
import sys, time
import torch
import torch.distributed as dist
import mlperf_train, rank_compute

slow_where, sleep = sys.argv[1], float(sys.argv[2])
dist.init_process_group('gloo')
rank = dist.get_rank()

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.norm = torch.nn.BatchNorm1d(8)     # buffers: DDP broadcasts them

    def forward(self, x):
        if rank == 1 and slow_where == 'forward':
            time.sleep(sleep)
        return self.norm(self.linear(x))

model = mlperf_train.wrap_ddp(Net(), torch.device('cpu'), 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
steps = []
for n in range(6):
    start = time.perf_counter()
    if rank == 1 and slow_where == 'before':
        time.sleep(sleep)
    loss = model(torch.randn(4, 8)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    rank_compute.step_done()
    steps.append(time.perf_counter() - start)
    if n == 0:
        rank_compute.discard()
sys.stdout.write(f'step {rank} {sum(steps[1:]) / len(steps[1:])}\\n')
sys.stdout.flush()
rank_compute.emit(rank)
dist.destroy_process_group()
'''


def run_two_ranks(tmp_path, slow_where):
    '''(rank_compute records, each rank's mean step seconds) of two DDP
    ranks, rank 1 slowed by SLEEP s per step at *slow_where*.'''
    script = tmp_path / 'ddp.py'
    script.write_text(DDP_SCRIPT)
    env = {**os.environ, 'PYTHONPATH': str(REPO / 'src'),
           'OMP_NUM_THREADS': '1'}
    proc = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc-per-node',
         '2', '--standalone', str(script), slow_where, str(SLEEP)],
        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = {int(line.split()[1]): float(line.split()[2])
             for line in proc.stdout.splitlines() if line.startswith('step ')}
    found = {r['rank']: r for r in hpcml_records.records(proc.stdout,
                                                         'rank_compute')}
    return found, steps


def test_the_slow_rank_s_forward_is_its_own_and_not_its_peer_s_wait(
        tmp_path):
    '''Rank 1 slow in its forward: its figure shows it; rank 0, which
    waits for it in the all-reduce (its step is as long as rank 1's),
    keeps its own small figure, so the slow rank is named.'''
    found, steps = run_two_ranks(tmp_path, 'forward')
    assert found[1]['mean_s'] >= SLEEP
    assert found[0]['mean_s'] < SLEEP / 4
    assert steps[0] >= 0.8 * SLEEP             # rank 0 did wait
    assert device_check.slowest_rank(list(found.values())).startswith(
        'rank 1 on ')


def test_a_wait_before_the_forward_is_in_no_rank_s_figure(tmp_path):
    '''Rank 1 late to the step (slow outside its forward): rank 0 waits
    for it in DDP's buffer broadcast at the forward's start or in the
    all-reduce, and neither rank's forward figure holds that wait.'''
    found, steps = run_two_ranks(tmp_path, 'before')
    assert steps[0] >= 0.8 * SLEEP, (steps, found)
    assert found[0]['mean_s'] < SLEEP / 4, (steps, found)
    assert found[1]['mean_s'] < SLEEP / 4, (steps, found)


def test_the_shared_loop_prints_each_rank_s_record(tmp_path):
    '''CosmoFlow's program (the MLPerf-style loop of mlperf_train): one
    record of the timed steps (the first is not), the node named.'''
    env = {**os.environ, 'PYTHONPATH': str(REPO / 'src'),
           'OMP_NUM_THREADS': '1', 'HPCML_DEVICE_KIND': 'cpu'}
    proc = subprocess.run([sys.executable, '-m', 'cosmoflow', '--size',
                           'tiny', '--steps', '4'], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record, = hpcml_records.records(proc.stdout, 'rank_compute')
    assert record['steps'] == 3 and record['rank'] == 0
    assert record['node'] and record['measure'] == 'forward'
    assert 0 < record['median_s'] <= record['max_s']
    json.dumps(record)
