"""The parser of a program that prints one line per training step: what
a workload's parser declares (:class:`StepLines`: the step line's
pattern, where the world size is said, what the steps count) instead of
code of its own. The template's workload reads its log so
(``templates/workload/hpctestlib_ml/parsers/``).

A step line's fields are the pattern's named groups:

- ``seconds`` (required): the step's time;
- the count (``samples``, or what :attr:`StepLines.count` names, as
  ``tokens``): what the step did, all ranks together;
- ``step`` (optional): its number; the log's ``steps`` is the last one's,
  else the count of step lines;
- ``loss`` (optional): its training loss.

Its figures (:mod:`.throughput`), of the steps after the first (warm-up):
``<count>_per_second`` (all ranks), ``<count>_per_second_per_gpu`` and
``time_per_step_secs``. The timed region is the program's ``[hpcml]
timed region`` line's. Launchers' labels are taken off first
(:mod:`.labels`), so that patterns may be anchored (``^``). Standard
library only.
"""
import re

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, throughput, timed_window

#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of these logs.
JSON_NAMES = {'steps': 'steps', 'world_size': 'world_size',
              'loss_first': 'loss_first', 'loss_last': 'loss_last',
              'losses_finite': 'losses_finite',
              'timed_window': 'timed_window'}


class StepLines:
    '''What a program prints, declared: *step*, the pattern of its step
    line (named groups: the module docstring's fields; multi-line, so
    ``^`` and ``$`` are a line's ends); *world*, a pattern whose first
    group is the world size (None: the log does not say); *count*, the
    field the steps count (its figures' names); *warmup*, how many
    first steps the figures leave out.'''

    def __init__(self, step, world=None, count='samples', warmup=1):
        self.step = re.compile(step, re.M)
        self.world = re.compile(world, re.M) if world else None
        self.count, self.warmup = count, warmup
        missing = {'seconds', count} - set(self.step.groupindex)
        if missing:
            raise ValueError(f'the step pattern has no group named '
                             f'{" or ".join(sorted(missing))}')

    @property
    def throughput(self):
        '''The figure that is the workload's throughput: its
        declaration's ``throughput_metric``.'''
        return f'{self.count}_per_second'

    def _value(self, field, text):
        '''A field's *text* as a number: the step's number and its count
        an int where they are whole, the rest a float.'''
        whole = field in ('step', self.count) and text.isdigit()
        return int(text) if whole else float(text)

    def steps(self, text):
        '''[{field: value}] of the step lines of *text* (labels already
        taken off), in order.'''
        return [{k: self._value(k, v)
                 for k, v in match.groupdict().items() if v is not None}
                for match in self.step.finditer(text)]

    def world_size(self, text):
        '''The world size *text* says, None where it says none.'''
        found = self.world.search(text) if self.world else None
        return int(found.group(1)) if found else None

    def training_log(self, text):
        '''The log *text* read (module docstring), a
        :class:`~hpctestlib_ml.metrics.TrainingLog`.'''
        text = labels.strip(text)
        steps, world = self.steps(text), self.world_size(text)
        losses = [s['loss'] for s in steps if 'loss' in s]
        last = steps[-1].get('step', len(steps)) if steps else 0
        return metrics.TrainingLog(
            steps=last, world_size=world, losses=losses,
            losses_finite=metrics.losses_finite(losses),
            timed_window=timed_window.from_suite_line(text),
            figures=throughput.figures(
                [(s['seconds'], s[self.count]) for s in
                 steps[self.warmup:]], world, self.count))

    def extract_metrics(self, text):
        '''The metrics of :meth:`training_log` as ``hpcml extract``
        prints them.'''
        return self.training_log(text).as_dict(JSON_NAMES)
