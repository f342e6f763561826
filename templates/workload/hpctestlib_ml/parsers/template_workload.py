"""The log of ``src/template_workload`` (its package docstring says what it
prints): one :class:`~hpctestlib_ml.metrics.TrainingLog` per log.

Its figures: ``samples_per_second`` (all ranks: the samples of the steps
after the first over their time; the first is warm-up),
``samples_per_second_per_gpu`` (that over the world size) and
``time_per_step_secs`` (the mean time of those steps).
"""
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

_START = re.compile(r'^template_workload: world size (\d+), batch (\d+) per '
                    r'rank', re.M)
_STEP = re.compile(r'^template_workload: step (\d+)/(\d+) loss (\S+) time '
                   r'(\S+) s samples (\d+)$', re.M)

#: ``hpcml extract``'s keys for the TrainingLog fields of these logs.
JSON_NAMES = {'steps': 'steps', 'world_size': 'world_size',
              'loss_first': 'loss_first', 'loss_last': 'loss_last',
              'losses_finite': 'losses_finite',
              'timed_window': 'timed_window'}


def training_log(text):
    '''The log *text* read: its steps, world size, losses, timed region
    and figures (module docstring).'''
    text = labels.strip(text)
    start = _START.search(text)
    world = int(start.group(1)) if start else None
    steps = [(int(n), float(loss), float(seconds), int(samples))
             for n, _, loss, seconds, samples in _STEP.findall(text)]
    timed = steps[1:]
    seconds = sum(s for _, _, s, _ in timed)
    rate = (sum(n for _, _, _, n in timed) / seconds
            if timed and seconds > 0 else None)
    losses = [loss for _, loss, _, _ in steps]
    return metrics.TrainingLog(
        steps=steps[-1][0] if steps else 0, world_size=world, losses=losses,
        losses_finite=metrics.losses_finite(losses),
        timed_window=timed_window.from_suite_line(text),
        figures={'samples_per_second': rate,
                 'samples_per_second_per_gpu': (rate / world
                                                if rate and world else None),
                 'time_per_step_secs': (statistics.fmean(
                     s for _, _, s, _ in timed) if timed else None)})


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them.'''
    return training_log(text).as_dict(JSON_NAMES)
