"""Synthetic data is made outside the timed step.

At the reference sizes the host takes 2.4-2.8 s to make one CosmoFlow
batch, 1.07 s for DeepCAM and 1.08 s for AlphaFold2, against GPU steps of
tens of milliseconds: made inside the step, throughput, MFU and energy
per sample would measure the host's random-number generator. Here each
MLPerf-style program runs with its synthetic-data generator slowed by
SLEEP seconds a batch; no steady-state step may overlap a batch being
made (the sleeps' wall-clock intervals against the steps' windows from
their ``tracked_stats`` time and step time: a test that holds on a loaded
machine, where a step's own compute may take SLEEP seconds), and the
``timing`` record must find the steps' data time small.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

SLEEP = 2.0

#: program -> (module whose generator is slowed, generator, arguments)
PROGRAMS = {
    'cosmoflow': ('cosmoflow.__main__', 'synthetic', []),
    'deepcam': ('deepcam.__main__', 'synthetic', []),
    'alphafold2': ('alphafold2.__main__', 'synthetic_proteins', []),
    'bert_pretrain': ('bert_pretrain.data', 'synthetic_batches',
                      ['--model', 'tiny']),
}

DRIVER = '''
import importlib, sys, time
module = importlib.import_module(sys.argv[1])
make = getattr(module, sys.argv[2])
def slow(*args, **kwargs):
    for batch in make(*args, **kwargs):
        started = time.time()
        time.sleep({sleep})
        print(f'[slept] {{started}} {{time.time()}}', file=sys.stderr,
              flush=True)
        yield batch
setattr(module, sys.argv[2], slow)
program = importlib.import_module(sys.argv[3] + '.__main__')
sys.exit(program.main(sys.argv[4:]))
'''


@pytest.mark.parametrize('program', list(PROGRAMS))
def test_synthetic_batches_are_made_before_the_timed_steps(program):
    module, generator, args = PROGRAMS[program]
    env = {**os.environ, 'PYTHONPATH': str(REPO / 'src'),
           'OMP_NUM_THREADS': '2'}
    proc = subprocess.run(
        [sys.executable, '-c', DRIVER.format(sleep=SLEEP), module, generator,
         program, '--steps', '3', '--eval-batches', '1', '--batch-size', '1',
         *args], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line.split(':::MLLOG ', 1)[1])
              for line in proc.stdout.splitlines()
              if '"key": "tracked_stats"' in line]
    assert len(events) == 3
    # Each steady step's wall-clock window: it ends at its event.
    windows = [(e['time_ms'] / 1000 - e['value']['step_time'],
                e['time_ms'] / 1000) for e in events[1:]]
    sleeps = [tuple(map(float, line.split()[1:]))
              for line in proc.stderr.splitlines()
              if line.startswith('[slept] ')]
    assert sleeps, 'the slowed generator never ran'
    # 5 ms: the events' time_ms is whole milliseconds.
    inside = [(s, w) for s in sleeps for w in windows
              if s[0] < w[1] - 0.005 and s[1] > w[0] + 0.005]
    assert not inside, f'batches made during timed steps: {inside}'
    timing = re.search(r'^\[hpcml\] timing (\{.*\})$', proc.stdout, re.M)
    assert timing, proc.stdout[-2000:]
    record = json.loads(timing.group(1))
    assert record['steps'] == 2
    assert record['data_s'] < 0.1 * record['compute_s'], record


def test_the_pool_holds_one_batch_a_step_where_they_fit():
    sys.path.insert(0, str(REPO / 'src'))
    import torch
    from mlperf_train import POOL_BYTES, Batches, pool_size
    # CosmoFlow's reference batch: 4 x 4 x 128^3 fp32 = 128 MiB.
    assert pool_size(4 * 4 * 128 ** 3 * 4, 100) == 4
    assert pool_size(2 * 2 ** 20, 20) == 20
    assert pool_size(POOL_BYTES * 2, 100) == 1

    def counting():
        n = 0
        while True:
            n += 1
            yield torch.full((2,), float(n)), {'y': torch.tensor(n)}

    source = counting()
    batches = Batches(source, torch.device('cpu'), steps=3, pooled=True)
    seen = [int(next(batches)[0][0]) for _ in range(5)]
    assert seen == [1, 2, 3, 1, 2]                 # the pool, cycled
    assert int(next(source)[0][0]) == 4            # held out: never trained
    direct = Batches(counting(), torch.device('cpu'), steps=3, pooled=False)
    assert [int(next(direct)[0][0]) for _ in range(4)] == [1, 2, 3, 4]
    assert direct.seconds >= 0


def test_fp16_scales_the_loss_so_small_gradients_survive():
    '''fp16's smallest subnormal is 6e-8: gradients below it vanish
    unless the loss is scaled (review finding 18). A step whose true
    gradient is 1e-8 moves the weight only with the programs' scaler.'''
    sys.path.insert(0, str(REPO / 'src'))
    import torch
    from mlperf_train import grad_scaler, supervised_step
    cpu = torch.device('cpu')
    assert grad_scaler(cpu, 'fp16').is_enabled()
    assert not grad_scaler(cpu, 'bf16').is_enabled()
    model = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.ones_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e4)
    batch = (torch.ones(1, 1), torch.zeros(1, 1))
    # The loss in fp32 (as the programs' losses are); its gradient enters
    # the fp16 output at 1e-8.
    step = supervised_step(model, iter([batch] * 2),
                           lambda out, y: (out.float() - y).sum() * 1e-8,
                           optimizer, cpu, 'fp16')
    step(1)
    assert model.weight.item() == pytest.approx(1 - 1e-4, rel=1e-3)
