"""Logs of ``python -m storage_bench`` (the ``Storage`` component): one
line per rank, operation and round::

    [storage_bench] rank 0 round 0 op read_npy bytes 1073741824 seconds 0.5123 files 128 writer 4 cache fadvise

(what each operation does: the program's docstring). A round's aggregate
rate is its bytes, all ranks together, over its slowest rank's seconds
(every rank started after a barrier: the job's rate, as a training job
sees its storage); its rate per rank the mean of each rank's bytes over
its own seconds. Standard library only.
"""
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

LINE = re.compile(r'\[storage_bench\] rank (\d+) round (\d+) op (\w+) '
                  r'bytes (\d+) seconds (\S+) files (\d+) writer (\d+) '
                  r'cache (\w+)')

#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of these logs.
JSON_NAMES = {'steps': 'rounds', 'world_size': 'world_size',
              'timed_window': 'timed_window'}

#: Gigabyte: 1e9 bytes (as nccl-tests' GB/s).
GB = 1e9


def operations(text):
    '''op -> round -> rank -> (bytes, seconds, cache), in the log's
    order.'''
    found = {}
    for m in LINE.finditer(text):
        found.setdefault(m.group(3), {}).setdefault(int(m.group(2)), {})[
            int(m.group(1))] = (int(m.group(4)), float(m.group(5)),
                                m.group(8))
    return found


def op_figures(op, rounds):
    '''``<op>_GBps`` (the rounds' mean aggregate rate), ``<op>_GBps_per_rank``
    (the rounds' mean rate per rank), ``<op>_bytes`` (a round's, all
    ranks) and ``<op>_cache`` (``fadvise`` where every read dropped the
    page cache first, else ``none``).'''
    aggregate, per_rank = [], []
    for ranks in rounds.values():
        slowest = max(s for _, s, _ in ranks.values())
        aggregate.append(sum(b for b, _, _ in ranks.values()) / slowest / GB)
        per_rank.append(statistics.fmean(b / s / GB
                                         for b, s, _ in ranks.values()))
    caches = {c for ranks in rounds.values() for _, _, c in ranks.values()}
    last = list(rounds.values())[-1]
    return {f'{op}_GBps': statistics.fmean(aggregate),
            f'{op}_GBps_per_rank': statistics.fmean(per_rank),
            f'{op}_bytes': sum(b for b, _, _ in last.values()),
            f'{op}_cache': caches.pop() if len(caches) == 1 else 'none'}


def training_log(text):
    '''A log of the program as a :class:`~hpctestlib_ml.metrics.
    TrainingLog`: ``steps`` the rounds every operation completed,
    ``world_size`` and ``ranks`` the ranks that reported every operation
    of every round, ``timed_window``, no losses; figures:
    ``operations`` (in the log's order) and :func:`op_figures` of each.'''
    text = labels.strip(text)
    found = operations(text)
    figures = {'operations': list(found)}
    for op, rounds in found.items():
        figures.update(op_figures(op, rounds))
    every = [frozenset(ranks) for rounds in found.values()
             for ranks in rounds.values()]
    ranks = frozenset.intersection(*every) if every else None
    steps = min((len(rounds) for rounds in found.values()), default=None)
    return metrics.TrainingLog(
        steps=steps, world_size=len(ranks) if ranks else None, ranks=ranks,
        timed_window=timed_window.from_suite_line(text), figures=figures)


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them.'''
    return training_log(text).as_dict(JSON_NAMES)
