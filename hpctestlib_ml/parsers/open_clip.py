"""OpenCLIP training logs (``open_clip_train``), as the MMoCLIP benchmark reads them.

A training line looks like (OpenCLIP 2.x and 3.x; 1.x lacks ``/s/gpu``)::

    2023-04-21,12:03:20 | INFO | Train Epoch: 0 [  32768/3200000 (1%)] Data (t): 0.029
    Batch (t): 6.655, 2461.78/s, 76.9308/s/gpu LR: 0.000000 Logit Scale: 14.286
    Contrastive_loss: 9.7031 (9.7031) Loss: 9.7031 (9.7031)

(one line in the log). Lines may carry prefixes (``[rank0]:``, JUBE's or
srun's labels), so nothing is anchored at the start of a line.

The metrics follow the MMoCLIP benchmark (jubench-mmoclip, DESCRIPTION.md,
"Results"): the first logged step includes start-up and is skipped.

OpenCLIP logs every ``--log-every-n-steps`` steps (default 100; MMoCLIP
requires 1). Its meters are reset after each line (``open_clip_train/
train.py``), so ``Batch (t)`` is the mean batch time of the steps since the
previous logging step, while ``/s`` and ``/s/gpu`` are the last batch's
rates (``samples_per_second = accum_freq x batch_size x world_size / the
last batch's time``). A line's sample count is its step (from 1) x the
global batch (``batch_size x world_size x accum_freq`` of the ``Params:``
dump, else inferred from the sample counts and checked against the rates).
The logging window comes from the ``Params:`` dump or a regular spacing
of the lines (:func:`logging_window`); where lines are missing, the steps
they held are counted (``steps_not_logged``), not filled in.
"""
import collections
import math
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

_TRAIN_LINE = re.compile(
    r'Train Epoch: (?P<epoch>\d+) \[\s*(?P<samples>\d+)/(?P<samples_total>\d+)'
    r' \((?P<percent>\d+(?:\.\d+)?)%\)\](?P<rest>.*)'
)
_FLOAT = r'[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)'
_BATCH_TIME = re.compile(rf'Batch \(t\): (?P<t>{_FLOAT})')
_DATA_TIME = re.compile(rf'Data \(t\): (?P<t>{_FLOAT})')
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
    ``batch_time``, ``data_time`` (the part of it spent waiting for the
    batch; None where not logged), ``throughput``, ``throughput_per_gpu`` (None in logs of
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
        data_time = _DATA_TIME.search(rest)
        per_gpu = throughput['per_gpu']
        steps.append({
            'epoch': int(match['epoch']),
            'samples': int(match['samples']),
            'samples_total': int(match['samples_total']),
            'percent': float(match['percent']),
            'batch_time': float(batch_time['t']),
            'data_time': float(data_time['t']) if data_time else None,
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


def global_batch(text, steps):
    '''Samples per optimizer step: from OpenCLIP's ``Params:`` dump, else
    the largest common divisor of the logged sample counts, where a
    one-step window's rate confirms it (gb / Batch (t) = the logged rate);
    None where neither tells.'''
    params = parse_params(text)
    try:
        return (int(params['batch_size']) * int(params['world_size']) *
                int(params.get('accum_freq', 1)))
    except (KeyError, ValueError):
        pass
    counts = [s['samples'] for s in steps[:1]] + [
        b['samples'] - a['samples'] for a, b in zip(steps, steps[1:])
        if b['epoch'] == a['epoch']]
    counts = [c for c in counts if c > 0]
    if not counts:
        return None
    batch = math.gcd(*counts)
    for a, b in zip(steps, steps[1:]):
        if b['samples'] - a['samples'] == batch and b['batch_time'] > 0:
            rate = batch / b['batch_time']
            if abs(rate / b['throughput'] - 1) > 0.05:
                return None      # a "one-step" window that is not one
    return batch


def _is_epoch_end(step, batch):
    """The line of an epoch's last step: no further global batch fits in
    the epoch's samples (OpenCLIP logs it whatever the window)."""
    return step['samples'] + batch > step['samples_total']


def intervals(steps, batch):
    """Steps between each line and the previous one (the first line: None;
    a line opening an epoch: its steps since the epoch began; None where the
    count does not advance by whole global batches, as after a restart)."""
    result = [None]
    for a, b in zip(steps, steps[1:]):
        same_epoch = b['epoch'] == a['epoch']
        if not same_epoch and b['epoch'] < a['epoch']:
            result.append(None)
            continue
        done = b['samples'] - (a['samples'] if same_epoch else 0)
        result.append(done // batch if batch and done > 0 and
                      done % batch == 0 else None)
    return result


def logging_window(text, steps, batch):
    """OpenCLIP's ``--log-every-n-steps`` of the run: from its ``Params:``
    dump, else from the spacing of the lines; None where they do not tell.

    OpenCLIP logs the steps whose index ``i`` (from 0) is a multiple of the
    window, and an epoch's last step (``open_clip_train/train.py``), so two
    consecutive lines inside an epoch lie a multiple of the window apart,
    more than one where lines are lost (a filter, a cut log). The window
    is therefore 1 where those spacings have no common divisor above 1, else
    the most common spacing where a majority of at least two spacings shows
    it and every spacing is a multiple of it. One spacing, or spacings
    without a majority, tell nothing: no window is invented from them.
    """
    logged = parse_params(text).get('log_every_n_steps')
    if logged is not None:
        try:
            return int(logged)
        except ValueError:
            pass
    spacings = [n for (n, a, b) in zip(intervals(steps, batch)[1:], steps,
                                       steps[1:])
                if n is not None and a['epoch'] == b['epoch'] and
                not _is_epoch_end(b, batch)]
    if not spacings:
        return None
    if math.gcd(*spacings) == 1:
        return 1
    common, count = collections.Counter(spacings).most_common(1)[0]
    if count >= 2 and 2 * count > len(spacings) and all(
            n % common == 0 for n in spacings):
        return common
    return None


def covered_steps(step, batch, window):
    """Steps that a line's ``Batch (t)`` and ``Data (t)`` average over.

    OpenCLIP resets its meters at every line it logs, printed here or not,
    so a line covers the steps since the last logging step before it: the
    window, 1 for an epoch's first step, the remainder for an epoch's last
    step. None where the line is at no logging step of that window."""
    index = step['samples'] // batch - 1        # OpenCLIP's i, from 0
    if index % window == 0:
        return min(window, index + 1)
    if _is_epoch_end(step, batch):
        return index % window
    return None


#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of OpenCLIP logs: the names its JSON has always had.
JSON_NAMES = {'steps': 'steps', 'loss_last': 'loss_last',
              'losses': 'losses', 'losses_finite': 'loss_all_finite',
              'timed_window': 'timed_window'}


def extract_metrics(text):
    """:func:`training_log` as ``hpcml extract`` prints it (its keys of
    old: ``loss_all_finite`` for ``losses_finite``)."""
    return training_log(text).as_dict(JSON_NAMES)


def training_log(text):
    """The MMoCLIP metrics of one OpenCLIP training log, the first logged
    line (start-up) skipped, as a :class:`~hpctestlib_ml.metrics.
    TrainingLog`: ``steps`` (logged training lines), ``world_size`` and
    ``ranks`` (the start lines', :func:`ranks_started`), ``losses``
    (every logged training loss, in order), and the figures:

    - ``total_time_secs``: the benchmark's metric, the training time the
      lines after the first report: the sum of ``Batch (t)`` x the steps it
      averages over (with every step logged, MMoCLIP's sum of ``Batch (t)``).
      Steps whose lines are missing count nothing: no time is extrapolated
      from the line after a gap;
    - ``time_per_iteration_secs_avg``: that time / its steps;
    - ``throughput_avg``: samples/s over all ranks: with every step logged
      the mean of the logged rates (JUBE's estimator, warm-up excluded);
      with longer windows, samples / time (the logged rate is then the last
      batch's only);
    - ``throughput_per_gpu_avg``: per rank, likewise (OpenCLIP 1.x logs,
      which lack ``/s/gpu``: ``throughput_avg / world_size``);
    - ``data_share``: % of that time rank 0 waited for data (OpenCLIP's
      ``Data (t)``, the window's mean wait, within ``Batch (t)``);
    - ``log_every_n_steps``: OpenCLIP's logging window
      (:func:`logging_window`; None if unknown);
    - ``steps_not_logged``: steps between the first and the last line that
      no line reports (lines lost); 0 for a whole log, None if unknown;
    - ``done_percent_last``.

    Figures that need the window are None where the global batch or the
    window cannot be known (an excerpt without the ``Params:`` dump whose
    counts do not tell): no number rather than a wrong one.
    """
    text = labels.strip(text)
    steps = parse_train_lines(text)
    ranks, world_size = ranks_started(text)
    losses = [s['loss'] for s in steps if s['loss'] is not None]
    return metrics.TrainingLog(
        steps=len(steps), world_size=world_size, ranks=frozenset(ranks),
        losses=losses, losses_finite=metrics.losses_finite(losses),
        timed_window=timed_window.from_open_clip(text),
        figures=_timing_figures(text, steps, world_size))


def _timing_figures(text, steps, world_size):
    """The figures of :func:`training_log` from the lines' times, rates
    and sample counts, in ``hpcml extract``'s order."""
    steady = steps[1:]
    batch = global_batch(text, steps)
    window = logging_window(text, steps, batch) if batch else None
    spans = intervals(steps, batch)[1:]
    covered = [covered_steps(s, batch, window) if window else None
               for s in steady]
    gaps = [n - c if n is not None and c is not None else None
            for n, c in zip(spans, covered)]
    known = bool(steady) and None not in gaps and min(gaps) >= 0
    total = (sum(s['batch_time'] * n for s, n in zip(steady, covered))
             if known else None)
    if known and window == 1:
        throughput_avg = _mean([s['throughput'] for s in steady])
        per_gpu = [s['throughput_per_gpu'] for s in steady]
        per_gpu_avg = _mean(per_gpu) if None not in per_gpu else None
    elif known and total:
        throughput_avg = batch * sum(covered) / total
        per_gpu_avg = None
    else:
        throughput_avg = per_gpu_avg = None
    if per_gpu_avg is None and throughput_avg is not None:
        world = world_size or _world_from_rates(steady)
        per_gpu_avg = throughput_avg / world if world else None

    data = (sum(s['data_time'] * n for s, n in zip(steady, covered))
            if known and None not in [s['data_time'] for s in steady]
            else None)
    return {
        'log_every_n_steps': window,
        'steps_not_logged': sum(gaps) if known else None,
        'total_time_secs': round(total, 6) if total is not None else None,
        'time_per_iteration_secs_avg': (total / sum(covered)
                                        if total is not None else None),
        'throughput_avg': throughput_avg,
        'throughput_per_gpu_avg': per_gpu_avg,
        'data_share': (100 * data / total if data is not None and total
                       else None),
        'done_percent_last': steps[-1]['percent'] if steps else None,
    }


def _world_from_rates(steps):
    '''Ranks, from a line's ``/s`` over its ``/s/gpu``.'''
    for s in steps:
        if s['throughput_per_gpu']:
            return round(s['throughput'] / s['throughput_per_gpu'])
    return None
