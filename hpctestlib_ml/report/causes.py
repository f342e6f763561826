"""What changed beside a change: the provenance of the runs before a change
point against the runs after it, most likely cause first.

Each run carries its provenance (``hpctestlib_ml.provenance``: framework
versions, CUDA, driver, NCCL, container image, environment switches, the
suite's version, the node list). Fields that hold several ``name=value``
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

#: Provenance fields in the order they break ties (most likely cause first).
FIELD_ORDER = ('gpu_driver', 'cuda_version', 'nccl_version',
               'framework_versions', 'container_image', 'env_switches',
               'suite_version', 'energy_counter', 'job_nodelist')
#: Fields of name=value pairs, split into one entry per name.
PAIR_FIELDS = ('framework_versions', 'env_switches')


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
    '''One run's provenance, pair fields split: ``{field: value}``.'''
    out = {}
    for name in FIELD_ORDER:
        value = (run.params.get(name) or '').strip()
        if name in PAIR_FIELDS:
            for key, item in _pairs(value).items():
                out[f'{name.split("_")[0]}/{key}'] = item
        else:
            out[name] = value
    return out


def _ordered(values):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return sorted(counts, key=lambda v: (-counts[v], v))


def _rank(name):
    base = {'framework': 'framework_versions',
            'env': 'env_switches'}.get(name.split('/')[0], name)
    return FIELD_ORDER.index(base) if base in FIELD_ORDER else len(FIELD_ORDER)


def differences(before_runs, after_runs):
    '''Every provenance field whose values differ between the sides, as
    :class:`Difference`, most likely cause first.'''
    before = [facts(r) for r in before_runs]
    after = [facts(r) for r in after_runs]
    if not before or not after:
        return []
    names = {n for f in before + after for n in f}
    found = []
    for name in names:
        b = [f.get(name, '') for f in before]
        a = [f.get(name, '') for f in after]
        if set(a) == set(b):
            continue
        new_after = sum(v not in set(b) for v in a) / len(a)
        gone_before = sum(v not in set(a) for v in b) / len(b)
        score = new_after * gone_before
        if new_after == 0 and gone_before == 0:
            continue
        found.append(Difference(name, _ordered(b), _ordered(a), score))
    return sorted(found, key=lambda d: (-d.score, _rank(d.field), d.field))


def likely_cause(before_runs, after_runs, limit=3):
    '''One line: the differences that separate the sides best, or what was
    the same.'''
    found = [d for d in differences(before_runs, after_runs) if d.score > 0]
    if not found:
        return 'no provenance difference (same versions, switches, nodes)'
    return '; '.join(d.describe() for d in found[:limit])
