"""Logs of ``python -m sdc`` (the ``SilentDataCorruption`` component):
each rank's ``[hpcml] answer`` record per repetition, with the digest of
each result, and ``[hpcml] answer_error`` where ranks differed (the
fields: :mod:`hpctestlib_ml.parsers.hpcml_records`; what they say:
:mod:`hpctestlib_ml.answers`). Records may sit behind a launcher's label;
ranks print in any order. Standard library only.
"""
from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import hpcml_records, labels, timed_window

#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of these logs.
JSON_NAMES = {'steps': 'repetitions', 'world_size': 'world_size',
              'timed_window': 'timed_window'}


def training_log(text):
    '''A log of the program as a :class:`~hpctestlib_ml.metrics.
    TrainingLog`: ``steps`` the repetitions every rank printed, ``ranks``
    the ranks that printed one, ``world_size`` their count, no losses,
    ``timed_window``; figures: ``answer_s`` (the slowest rank's seconds
    over its repetitions: the computation, its digests and the
    comparisons) and ``items`` (results digested per repetition).'''
    text = labels.strip(text)
    answers = hpcml_records.records(text, 'answer')
    repetitions, seconds, items = {}, {}, 0
    for record in answers:
        rank = record.get('rank')
        repetitions.setdefault(rank, set()).add(record.get('repetition'))
        seconds[rank] = seconds.get(rank, 0.0) + float(
            record.get('seconds') or 0.0)
        items = max(items, len(record.get('digests') or {}))
    ranks = frozenset(r for r in repetitions if isinstance(r, int))
    figures = {'items': items}
    if seconds:
        figures['answer_s'] = round(max(seconds.values()), 6)
    return metrics.TrainingLog(
        steps=min(len(r) for r in repetitions.values()) if repetitions
        else None,
        world_size=len(ranks) or None, ranks=ranks or None,
        timed_window=timed_window.from_suite_line(text), figures=figures)


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them.'''
    return training_log(text).as_dict(JSON_NAMES)
