"""What changed beside a change: the provenance of the runs before a change
point against the runs after it, most likely cause first.

Each run carries its provenance (``hpctestlib_ml.provenance``: framework
versions, CUDA, driver, NCCL, container image, environment switches, the
suite's version, the node list) and what its ranks ran on
(``device_ran``: a GPU case that ran on another device) and the peak its
MFU used (``mfu_peak``). Fields that hold several ``name=value``
pairs (framework versions, switches) are split, so that one package's
update is named by itself: ``torch 2.14.1 -> 2.15.0``.

A difference is scored by how cleanly it separates the two sides: the share
of runs after the change whose value no run before had, times the share of
runs before whose value no run after has. A driver updated exactly at the
change scores 1; a node list that varies on both sides scores near 0. Ties
go to the fields that most often explain a performance change on HPC
systems (:data:`FIELD_ORDER`).
"""
import dataclasses

from hpctestlib_ml import perflog_fields

#: Provenance fields in the order they break ties (most likely cause
#: first): their declared ``cause_rank``.
FIELD_ORDER = perflog_fields.by_cause_rank()
#: Fields of name=value pairs, split into one entry per name.
PAIR_FIELDS = perflog_fields.pair_fields()


@dataclasses.dataclass
class Difference:
    field: str          # provenance field, or field/name for pair fields
    before: list        # distinct values before the change (most common first)
    after: list         # distinct values after it
    score: float        # 0..1, how cleanly it separates the sides

    def describe(self):
        return f'{self.field} {_values(self.before)} -> {_values(self.after)}'


def _values(values):
    shown = ', '.join(v or '(none)' for v in values[:2])
    return shown + (f' (+{len(values) - 2})' if len(values) > 2 else '')


def _pairs(text):
    pairs = {}
    for item in (text or '').replace(',', ';').split(';'):
        name, sep, value = item.strip().partition('=')
        if sep and name:
            pairs[name.strip()] = value.strip()
    return pairs


def facts(run):
    '''One run's provenance, pair fields split: ``{name: value}`` for every
    field its perflog logged (an older header lacks some).'''
    out = {}
    for field in FIELD_ORDER:
        if field not in run.params:
            continue
        value = (run.params.get(field) or '').strip()
        if field in PAIR_FIELDS:
            out[field] = ''             # logged: its names may be absent
            for key, item in _pairs(value).items():
                out[f'{_prefix(field)}/{key}'] = item
        else:
            out[field] = value
    return out


def _prefix(field):
    return field.split('_')[0]


def _field(name):
    '''The provenance field behind an entry of :func:`facts`.'''
    if '/' not in name:
        return name
    prefix = name.split('/')[0]
    return next(f for f in PAIR_FIELDS if _prefix(f) == prefix)


def _ordered(values):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return sorted(counts, key=lambda v: (-counts[v], v))


def _rank(name):
    field = _field(name)
    return FIELD_ORDER.index(field) if field in FIELD_ORDER else \
        len(FIELD_ORDER)


def differences(before_runs, after_runs):
    '''Every provenance entry whose values differ between the sides, as
    :class:`Difference`, most likely cause first. Runs whose perflog did
    not log a field say nothing about it.'''
    before = [facts(r) for r in before_runs]
    after = [facts(r) for r in after_runs]
    names = {n for f in before + after for n in f if n not in PAIR_FIELDS}
    found = []
    for name in names:
        field = _field(name)
        b = [f.get(name, '') for f in before if field in f]
        a = [f.get(name, '') for f in after if field in f]
        if not a or not b or set(a) == set(b):
            continue
        new_after = sum(v not in set(b) for v in a) / len(a)
        gone_before = sum(v not in set(a) for v in b) / len(b)
        found.append(Difference(name, _ordered(b), _ordered(a),
                                new_after * gone_before))
    return sorted(found, key=lambda d: (-d.score, _rank(d.field), d.field))


def likely_cause(before_runs, after_runs, limit=3):
    '''One line: the differences that separate the sides best, or what was
    the same.'''
    found = [d for d in differences(before_runs, after_runs) if d.score > 0]
    if not found:
        return 'no provenance difference (same versions, switches, nodes)'
    return '; '.join(d.describe() for d in found[:limit])
