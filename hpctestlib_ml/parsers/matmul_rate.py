"""Logs of ``python -m matmul_rate`` (the ``MatmulRate`` component): each
rank's achievable matrix-multiply rate per precision, one line each::

    [matmul_rate] rank 0 precision bf16 n 8192 iterations 10 products 10 tflops 712.31 min 705.2 max 715.02 tf32 False

(the program's docstring says how each figure is measured). Lines may sit
behind a launcher's label; ranks print in any order. Standard library
only.
"""
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

RATE_LINE = re.compile(
    r'\[matmul_rate\] rank (\d+) precision (\w+) n (\d+) iterations (\d+) '
    r'products (\d+) tflops (\S+) min (\S+) max (\S+) tf32 (True|False)')

#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of these logs.
JSON_NAMES = {'steps': 'iterations', 'world_size': 'world_size',
              'timed_window': 'timed_window'}


def rates(text):
    '''precision -> {rank: (TFLOP/s, slowest, fastest iteration's, tf32)},
    and the (n, iterations) the lines name (the last line's).'''
    found, shape = {}, (None, None)
    for match in RATE_LINE.finditer(text):
        rank, precision, n, iterations = (int(match.group(1)),
                                          match.group(2), int(match.group(3)),
                                          int(match.group(4)))
        found.setdefault(precision, {})[rank] = (
            float(match.group(6)), float(match.group(7)),
            float(match.group(8)), match.group(9) == 'True')
        shape = (n, iterations)
    return found, shape


def precision_figures(precision, per_rank):
    '''``<precision>_tflops`` (the ranks' mean: per device),
    ``<precision>_tflops_min`` (the slowest rank's: one slow device shows
    there, not in the mean) and ``<precision>_tf32`` (whether fp32
    products ran on TF32 on every rank).'''
    values = [v[0] for v in per_rank.values()]
    return {f'{precision}_tflops': statistics.fmean(values),
            f'{precision}_tflops_min': min(values),
            f'{precision}_tf32': all(v[3] for v in per_rank.values())}


def training_log(text):
    '''A log of the program as a :class:`~hpctestlib_ml.metrics.
    TrainingLog`: ``steps`` the timed iterations per precision,
    ``world_size`` the ranks that printed every precision (a rank missing
    from one is missing), ``ranks`` those ranks, no losses,
    ``timed_window``; figures: :func:`precision_figures` of each
    precision, ``precisions`` (in the log's order) and ``n``.'''
    text = labels.strip(text)
    found, (n, iterations) = rates(text)
    figures = {'precisions': list(found), 'n': n}
    for precision, per_rank in found.items():
        figures.update(precision_figures(precision, per_rank))
    ranks = (frozenset.intersection(*(frozenset(r) for r in found.values()))
             if found else None)
    return metrics.TrainingLog(
        steps=iterations, world_size=len(ranks) if ranks else None,
        ranks=ranks, timed_window=timed_window.from_suite_line(text),
        figures=figures)


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them.'''
    return training_log(text).as_dict(JSON_NAMES)
