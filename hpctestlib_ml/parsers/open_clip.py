"""OpenCLIP training logs (``open_clip_train``), as the MMoCLIP benchmark reads them.

A training line looks like (OpenCLIP 2.x and 3.x; 1.x lacks ``/s/gpu``)::

    2023-04-21,12:03:20 | INFO | Train Epoch: 0 [  32768/3200000 (1%)] Data (t): 0.029
    Batch (t): 6.655, 2461.78/s, 76.9308/s/gpu LR: 0.000000 Logit Scale: 14.286
    Contrastive_loss: 9.7031 (9.7031) Loss: 9.7031 (9.7031)

(one line in the log). Lines may carry prefixes (``[rank0]:``, JUBE's or
srun's labels), so nothing is anchored at the start of a line.

The metrics follow the MMoCLIP benchmark (jubench-mmoclip, DESCRIPTION.md,
"Results"): the first logged step includes start-up and is skipped.
"""
import math
import re
import statistics

from hpctestlib_ml.parsers import timed_window

_TRAIN_LINE = re.compile(
    r'Train Epoch: (?P<epoch>\d+) \[\s*(?P<samples>\d+)/(?P<samples_total>\d+)'
    r' \((?P<percent>\d+(?:\.\d+)?)%\)\](?P<rest>.*)'
)
_FLOAT = r'[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)'
_BATCH_TIME = re.compile(rf'Batch \(t\): (?P<t>{_FLOAT})')
_THROUGHPUT = re.compile(rf', (?P<total>{_FLOAT})/s(?:, (?P<per_gpu>{_FLOAT})/s/gpu)?')
_LOSS = re.compile(rf'(?<![A-Za-z_])Loss: (?P<loss>{_FLOAT})')
_RANK_STARTED = re.compile(
    r'Running in distributed mode with multiple processes\. Device: \S+?\.'
    r'Process \(global: (?P<rank>\d+), local (?P<local>\d+)\), total (?P<world>\d+)'
)
_SINGLE_PROCESS = re.compile(r'Running with a single process\. Device \S+?\.')
_PARAM = re.compile(r'\| INFO \|   (?P<key>\w+): (?P<value>.*)$', re.MULTILINE)
_REFUSED = re.compile(r'Error\. Experiment already exists')


def parse_train_lines(text):
    '''The logged training steps, in order, as dicts of floats.

    Keys: ``epoch``, ``samples``, ``samples_total``, ``percent``,
    ``batch_time``, ``throughput``, ``throughput_per_gpu`` (None in logs of
    OpenCLIP 1.x), ``loss`` (None where the line has no total loss).
    '''
    steps = []
    for match in _TRAIN_LINE.finditer(text):
        rest = match['rest']
        batch_time = _BATCH_TIME.search(rest)
        throughput = _THROUGHPUT.search(rest)
        if batch_time is None or throughput is None:
            continue

        loss = _LOSS.search(rest)
        per_gpu = throughput['per_gpu']
        steps.append({
            'epoch': int(match['epoch']),
            'samples': int(match['samples']),
            'samples_total': int(match['samples_total']),
            'percent': float(match['percent']),
            'batch_time': float(batch_time['t']),
            'throughput': float(throughput['total']),
            'throughput_per_gpu': float(per_gpu) if per_gpu else None,
            'loss': float(loss['loss']) if loss else None,
        })

    return steps


def parse_params(text):
    '''OpenCLIP's ``Params:`` dump (rank 0) as a dict of strings.'''
    return {m['key']: m['value'].strip() for m in _PARAM.finditer(text)}


def ranks_started(text):
    '''(set of global ranks that logged their start, world size or None).'''
    ranks, world = set(), None
    for match in _RANK_STARTED.finditer(text):
        ranks.add(int(match['rank']))
        world = int(match['world'])

    if not ranks and _SINGLE_PROCESS.search(text):
        return {0}, 1

    return ranks, world


def refused_to_run(text):
    '''OpenCLIP printed its "experiment already exists" refusal.'''
    return _REFUSED.search(text) is not None


def _mean(values):
    return statistics.fmean(values) if values else None


def extract_metrics(text):
    '''The MMoCLIP metrics of one OpenCLIP training log.

    - ``steps``: logged training steps;
    - ``total_time_secs``: sum of ``Batch (t)`` over all logged steps but the
      first (the benchmark's metric; equals the training time when every step
      is logged, ``--log-every-n-steps 1``);
    - ``time_per_iteration_secs_avg``: mean ``Batch (t)``, first step skipped;
    - ``throughput_avg``: mean samples/s over all ranks, first step skipped;
    - ``throughput_per_gpu_avg``: mean samples/s per rank, first step skipped
      (OpenCLIP 1.x logs: ``throughput_avg / world_size`` where known);
    - ``done_percent_last``: percent of the epoch done at the last logged step;
    - ``loss_last``: the last logged loss; ``loss_all_finite``.

    The steady-state figures need two logged steps; with fewer they are None.
    (JUBE's ``throughput_avg`` column averages all steps, the first too: the
    suite reports steady state, as DESIGN.md asks of every workload.)
    '''
    steps = parse_train_lines(text)
    steady = steps[1:]
    _, world_size = ranks_started(text)
    throughput_avg = _mean([s['throughput'] for s in steady])
    per_gpu = [s['throughput_per_gpu'] for s in steady]
    if per_gpu and None not in per_gpu:
        per_gpu_avg = _mean(per_gpu)
    elif throughput_avg is not None and world_size:
        per_gpu_avg = throughput_avg / world_size
    else:
        per_gpu_avg = None

    losses = [s['loss'] for s in steps if s['loss'] is not None]
    return {
        'steps': len(steps),
        'total_time_secs': (round(sum(s['batch_time'] for s in steady), 6)
                            if steady else None),
        'time_per_iteration_secs_avg': _mean([s['batch_time'] for s in steady]),
        'throughput_avg': throughput_avg,
        'throughput_per_gpu_avg': per_gpu_avg,
        'done_percent_last': steps[-1]['percent'] if steps else None,
        'loss_last': losses[-1] if losses else None,
        'loss_all_finite': all(math.isfinite(x) for x in losses) if losses else None,
        'timed_window': timed_window.from_open_clip(text),
    }
