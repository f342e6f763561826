"""The log of ``src/template_workload`` (its package docstring says what it
prints), read by :class:`~hpctestlib_ml.parsers.step_lines.StepLines`:
``samples_per_second`` (all ranks, the steps after the first: warm-up),
``samples_per_second_per_gpu`` and ``time_per_step_secs``.
"""
from hpctestlib_ml.parsers.step_lines import StepLines

#: What the program prints: its world size once, and each step's number,
#: loss, seconds and samples (all ranks).
LOG = StepLines(
    world=r'^template_workload: world size (\d+), batch \d+ per rank',
    step=r'^template_workload: step (?P<step>\d+)/\d+ loss (?P<loss>\S+) '
         r'time (?P<seconds>\S+) s samples (?P<samples>\d+)$')

training_log, extract_metrics = LOG.training_log, LOG.extract_metrics
