"""MLPerf logging (``:::MLLOG`` lines, the mlperf-logging package), shared by
the workloads that log this way (BERT, CosmoFlow, DeepCAM, OpenFold), for
the suite's programs and for MLPerf result logs (tested on submissions to
MLPerf HPC v1.0-v3.0 and Training v1.0-v4.0, ``tests/data/mllog/``).

One event per line, after any prefix (``[1,0]<stdout>:``, ``0:``)::

    :::MLLOG {"namespace": "", "time_ms": 1795310517100, "event_type":
    "INTERVAL_START", "key": "run_start", "value": null, "metadata":
    {"file": "...", "lineno": 73}}

The run is what lies between ``run_start`` and ``run_stop``, in the order
logged: MLPerf times and scores that window and nothing after it. Several
submissions keep training and evaluating after ``run_stop`` (HPE+LBNL's
CosmoFlow v3.0: the target met at epoch 23, seven more epochs with a worse
error follow); the mlperf-logging RCP checker takes the quality as the last
eval line before ``run_stop`` (mlcommons/logging
``mlperf_logging/rcp_checker/rcp_checker.py``, 7bbf792). So:

- in the window: the quality (the last ``eval_accuracy`` and
  ``eval_error``), the epochs (``epoch_stop``, else ``block_stop``), the
  training steps (``step_num``), the training throughput records and
  losses. An event logged before ``run_stop`` is in even at run_stop's
  millisecond; one logged after it is out, as an epoch that ends after
  ``run_stop`` (OpenFold's asynchronous evaluation stops the run in the
  middle of a block). Where the log lacks ``run_stop`` (a crashed run),
  the window runs to its end; where it lacks ``run_start``, from its start;
- from the whole log: the header, logged before ``run_start``
  (``submission_benchmark``, ``global_batch_size``, the world size), and
  ``run_stop``'s own ``status``.

What real logs hold, and how it is read:

- run time: ``run_stop`` minus ``run_start``, MLPerf's time to train (the
  result summarizer's definition);
- training throughput: the in-run records that carry a rate: a
  ``tracked_stats`` value with ``throughput`` (samples/s over all ranks;
  the suite's programs log one per step with its ``step_time``,
  submitters one per epoch or block), or a ``throughput`` event (NVIDIA's
  CosmoFlow v1.0). One figure logged under both is one record: the
  DeepCAM of NVIDIA's HPC v2.0 results and of Dell's, Clemson's and
  HelmholtzAI's logs each epoch's rate as a ``throughput`` event
  (metadata ``epoch_num``, ``step_num``) and on the next line as
  ``tracked_stats`` (``epoch``, ``step``), one variable (Dell's
  ``driver/trainer.py``, hpc_results_v3.0 350e46f; NVIDIA's v3.0 code
  logs only the second). Other
  ``tracked_stats`` are not training steps (OpenFold's
  ``staging_duration`` before ``run_start``, its data-loader
  ``avg_perf_next_batch``), nor is anything after ``run_stop`` (a late
  block, a run summary). The first training record is warm-up and
  skipped, as every throughput figure of the suite;
- training loss: the records' ``loss``, or ``train_loss`` events
  (DeepCAM);
- world size: ``number_of_ranks``, else ``number_of_nodes`` x
  ``accelerators_per_node`` (the result summarizer's instance scale);
  MLPerf Training logs carry neither (their scale is in the submission's
  system description).

MLPerf scores no samples/s: its HPC throughput metric is models trained per
minute over many concurrent runs. The samples/s here are the logged
auxiliary rates, for regression tracking.
"""
import json
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

MARKER = ':::MLLOG '


def parse_events(text):
    '''The events of every ``:::MLLOG`` line, in order (malformed ones skipped).'''
    events = []
    for line in text.splitlines():
        at = line.find(MARKER)
        if at < 0:
            continue
        try:
            event = json.loads(line[at + len(MARKER):])
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and 'key' in event:
            events.append(event)
    return events


def values(events, key):
    return [e.get('value') for e in events if e['key'] == key]


def first_value(events, key, default=None):
    found = values(events, key)
    return found[0] if found else default


def last_value(events, key, default=None):
    found = values(events, key)
    return found[-1] if found else default


def _event(events, key):
    return next((e for e in events if e['key'] == key), None)


def _metadata(event):
    metadata = event.get('metadata')
    return metadata if isinstance(metadata, dict) else {}


def tracked_stats(events):
    '''(step, stats dict) of each ``tracked_stats`` event.'''
    return [(_metadata(e).get('step'), e.get('value') or {})
            for e in events if e['key'] == 'tracked_stats']


def in_run(events):
    '''The run's events: those logged after ``run_start`` and before
    ``run_stop``, in file order (from the log's start where it lacks
    ``run_start``, to its end where it lacks ``run_stop``).'''
    keys = [e['key'] for e in events]
    start = keys.index('run_start') if 'run_start' in keys else -1
    stop = keys.index('run_stop') if 'run_stop' in keys else len(events)
    return events[start + 1:stop]


def _position(event):
    '''The (epoch, step) an event's metadata names: ``epoch_num`` and
    ``step_num``, or ``epoch`` and ``step`` (``tracked_stats``).'''
    metadata = _metadata(event)
    return (metadata.get('epoch_num', metadata.get('epoch')),
            metadata.get('step_num', metadata.get('step')))


def _rate_records(events):
    '''(event, samples/s, step time or None) of each in-run event that
    carries a training rate, copies included.'''
    records = []
    for event in in_run(events):
        value = event.get('value')
        if event['key'] == 'tracked_stats' and isinstance(value, dict):
            rate = value.get('throughput')
            if isinstance(rate, (int, float)):
                records.append((event, float(rate), value.get('step_time')))
        elif event['key'] == 'throughput' and isinstance(value, (int, float)):
            records.append((event, float(value), None))
    return records


def training_records(events):
    '''The in-run training throughput records as (event, samples/s,
    step time or None), in order, one per figure: a ``throughput`` event
    and a ``tracked_stats`` throughput of the same value at the same
    (epoch, step) are one record, the first logged.'''
    records, seen = [], set()
    for event, rate, step_time in _rate_records(events):
        other = 'throughput' if event['key'] == 'tracked_stats' else \
            'tracked_stats'
        if (other, _position(event), rate) in seen:
            continue
        seen.add((event['key'], _position(event), rate))
        records.append((event, rate, step_time))
    return records


def training_losses(events):
    '''In-run training losses: the records' ``loss``, else ``train_loss``
    events.'''
    run = in_run(events)
    losses = [e['value']['loss'] for e in run
              if e['key'] == 'tracked_stats' and isinstance(e.get('value'),
                                                            dict)
              and isinstance(e['value'].get('loss'), (int, float))]
    if not losses:
        losses = [e['value'] for e in run if e['key'] == 'train_loss'
                  and isinstance(e.get('value'), (int, float))]
    return [float(v) for v in losses]


def world_size(events):
    '''``number_of_ranks``, else nodes x accelerators per node, else the
    suite's older ``world_size`` event; None where the log has none.'''
    ranks = first_value(events, 'number_of_ranks')
    if isinstance(ranks, int) and ranks > 0:
        return ranks
    nodes = first_value(events, 'number_of_nodes')
    per_node = first_value(events, 'accelerators_per_node')
    if isinstance(nodes, int) and nodes > 0 and isinstance(per_node, int):
        return nodes * max(per_node, 1)
    return first_value(events, 'world_size')


def training_steps(run):
    '''Training steps done in the *run* (:func:`in_run`'s events), where
    the log says (the largest ``step_num`` of its epoch, block and
    training events); None where it does not.'''
    steps = [_metadata(e).get('step_num') for e in run
             if e['key'] in ('epoch_stop', 'block_stop', 'train_loss')]
    steps = [s for s in steps if isinstance(s, int)]
    return max(steps) if steps else None


def quality(events, targets):
    '''The run's quality against its target, in words: ``eval_accuracy
    0.7186 (bert's target >= 0.72, not reached)``: the last in-run
    evaluation (:func:`in_run`) of the key of its benchmark's target in
    *targets* (``submission_benchmark`` -> (key, ``>=`` or ``<=``,
    value): MLPerf's rules, read by the caller), else of
    ``eval_accuracy`` or ``eval_error``; None where the run logged
    none.'''
    benchmark = first_value(events, 'submission_benchmark')
    target = targets.get(benchmark)
    run = in_run(events)
    keys = (target[0],) if target else ('eval_accuracy', 'eval_error')
    key, value = next(((k, last_value(run, k)) for k in keys
                       if isinstance(last_value(run, k), (int, float))),
                      (keys[0], None))
    if value is None:
        return f'no {key} logged' if target else None
    words = f'{key} {value:.4g}'
    if not target:
        return f'{words} (no target known for benchmark {benchmark!r})'
    _, op, bound = target
    met = value >= bound if op == '>=' else value <= bound
    return (f"{words} ({benchmark}'s target {op} {bound:g}, "
            f"{'reached' if met else 'not reached'})")


def quality_met(events, targets):
    '''Whether the run's last in-run evaluation meets its benchmark's
    target in *targets* (as :func:`quality`); None where either is
    unknown.'''
    target = targets.get(first_value(events, 'submission_benchmark'))
    if not target:
        return None
    key, op, bound = target
    value = last_value(in_run(events), key)
    if not isinstance(value, (int, float)):
        return None
    return value >= bound if op == '>=' else value <= bound


def _ends(run, key):
    '''How many *key* events the *run* logged (None for none).'''
    return sum(e['key'] == key for e in run) or None


#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of MLPerf logs: the names its JSON has always had.
JSON_NAMES = {name: name for name in (
    'steps', 'world_size', 'loss_first', 'loss_last', 'losses',
    'losses_finite', 'timed_window')}


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them.'''
    return training_log(text).as_dict(JSON_NAMES)


def training_log(text):
    '''An MLPerf log (see the module docstring) as a
    :class:`~hpctestlib_ml.metrics.TrainingLog`: ``steps`` (the run's
    training steps, from ``step_num``; None where not logged),
    ``world_size``, ``losses`` (the in-run training losses, in order), the
    ``timed_window``, and the figures: ``events`` (how many),
    ``benchmark``, ``global_batch_size``, the last in-run
    ``eval_accuracy`` and ``eval_error`` (MLPerf's quality keys: the last
    before ``run_stop``), ``throughput_records``, ``epochs`` (the run's
    epoch ends, else block ends), ``status`` (run_stop's),
    ``run_time_secs``, and :func:`_speed_figures`.'''
    text = labels.strip(text)
    events = parse_events(text)
    run = in_run(events)
    records = training_records(events)
    start, stop = _event(events, 'run_start'), _event(events, 'run_stop')
    losses = training_losses(events)
    batch = first_value(events, 'global_batch_size')
    figures = {
        'events': len(events),
        'benchmark': first_value(events, 'submission_benchmark'),
        'global_batch_size': batch,
        'eval_accuracy': last_value(run, 'eval_accuracy'),
        'eval_error': last_value(run, 'eval_error'),
        'throughput_records': len(records),
        'epochs': _ends(run, 'epoch_stop') or _ends(run, 'block_stop'),
        'status': _metadata(stop).get('status') if stop else None,
        'run_time_secs': ((stop['time_ms'] - start['time_ms']) / 1000
                          if start and stop else None),
        **_speed_figures(records, batch),
    }
    return metrics.TrainingLog(
        steps=training_steps(run), world_size=world_size(events),
        losses=losses, losses_finite=metrics.losses_finite(losses),
        timed_window=timed_window.from_mllog(events, [
            event for event, _, _ in records]),
        figures=figures)


def _speed_figures(records, batch):
    '''``samples_per_second`` (steady state: global *batch* x records /
    their step times where every record has one, else the mean of the
    records' rates, the first record skipped) and ``time_per_step_secs``
    of the training *records* (:func:`training_records`); None where
    unknown.'''
    figures = {'samples_per_second': None, 'time_per_step_secs': None}
    steady = records[1:] if len(records) > 1 else records
    times = [t for _, _, t in steady if isinstance(t, (int, float))]
    if times and batch and len(times) == len(steady):
        # Time-weighted: samples over the steps' total time.
        figures['samples_per_second'] = batch * len(times) / sum(times)
        figures['time_per_step_secs'] = statistics.fmean(times)
    elif steady:
        figures['samples_per_second'] = statistics.fmean(
            rate for _, rate, _ in steady)
    return figures
