"""MLPerf logging (``:::MLLOG`` lines, the mlperf-logging package), shared by
the workloads that log this way (BERT here; CosmoFlow, DeepCAM and OpenFold
in MLPerf HPC).

One event per line, after any prefix (``[1,0]<stdout>:``, ``0:``)::

    :::MLLOG {"namespace": "", "time_ms": 1795310517100, "event_type":
    "INTERVAL_START", "key": "run_start", "value": null, "metadata":
    {"file": "...", "lineno": 73}}

Throughput: from the ``tracked_stats`` events (metadata ``step``), the first
skipped as warm-up: global batch x steps / their ``step_time`` sum where
both are logged, else the mean of their ``throughput``; run time: ``run_stop`` minus ``run_start``, as MLPerf scores it.
"""
import json
import math
import statistics

from hpctestlib_ml.parsers import timed_window

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


def tracked_stats(events):
    '''(step, stats dict) of each ``tracked_stats`` event.'''
    return [(e.get('metadata', {}).get('step'), e.get('value') or {})
            for e in events if e['key'] == 'tracked_stats']


def extract_metrics(text):
    '''``samples_per_second`` (mean of tracked throughput, first skipped),
    ``time_per_step_secs``, ``run_time_secs`` (run_stop - run_start),
    ``status`` (run_stop's), ``steps``, ``loss_last``, ``losses_finite``,
    ``global_batch_size``, ``world_size``, and the last ``eval_accuracy``
    and ``eval_error`` (MLPerf's quality keys), where logged.'''
    events = parse_events(text)
    stats = tracked_stats(events)
    start, stop = _event(events, 'run_start'), _event(events, 'run_stop')
    losses = [s.get('loss') for _, s in stats if s.get('loss') is not None]
    metrics = {
        'events': len(events),
        'benchmark': first_value(events, 'submission_benchmark'),
        'global_batch_size': first_value(events, 'global_batch_size'),
        'world_size': first_value(events, 'world_size'),
        'eval_accuracy': last_value(events, 'eval_accuracy'),
        'eval_error': last_value(events, 'eval_error'),
        'steps': len(stats),
        'status': (stop.get('metadata', {}).get('status')
                   if stop else None),
        'run_time_secs': ((stop['time_ms'] - start['time_ms']) / 1000
                          if start and stop else None),
        'loss_first': losses[0] if losses else None,
        'loss_last': losses[-1] if losses else None,
        'losses_finite': all(math.isfinite(v) for v in losses),
        'samples_per_second': None,
        'time_per_step_secs': None,
        'timed_window': timed_window.from_mllog(events),
    }
    steady = stats[1:] if len(stats) > 1 else stats
    times = [s['step_time'] for _, s in steady if 'step_time' in s]
    batch = metrics['global_batch_size']
    if times and batch and len(times) == len(steady):
        # Time-weighted: samples over the steps' total time.
        metrics['samples_per_second'] = batch * len(times) / sum(times)
        metrics['time_per_step_secs'] = statistics.fmean(times)
    else:
        rates = [s['throughput'] for _, s in steady if 'throughput' in s]
        if rates:
            metrics['samples_per_second'] = statistics.fmean(rates)
    return metrics
