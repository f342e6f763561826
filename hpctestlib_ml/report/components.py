"""Which part of the system moved with a training change: the component
benchmarks (collectives, matrix products, storage: :mod:`hpctestlib_ml.
registry`, ``kind='component'``) of the same system and partition, over
the same window.

When a training case's headline is flagged (:mod:`hpctestlib_ml.changes`),
each figure of each component case on its ``system:partition`` that the
references give a direction (:func:`hpctestlib_ml.history_refs.derive.
metric_direction`) is searched for its own latest change, by the same test
(:func:`hpctestlib_ml.changes.latest_change`: a shift at p < 0.001, at
least 5 %). A component changed *with* the training case when its
change, a slowdown, begins where the training change began: after the
training case's last run before it and no later than its second run after
it (a nightly suite runs one night's cases one after another, in either
order: the component's first slow run may come minutes before the training
case's first slow run, or after it and before its next one). The largest
such change is the likely cause:
``likely cause: network, allreduce_busbw_GBps -38% since 2026-11-20 on
n2``. Where the component's runs ran on single nodes (a node sweep), each
node's runs are their own series and the nodes named are those that
changed; else the nodes its runs after the change ran on.
"""
import dataclasses
import time

from hpctestlib_ml import registry
from hpctestlib_ml.history_refs.derive import metric_direction
from hpctestlib_ml import changes


@dataclasses.dataclass
class Moved:
    '''A component figure that got worse with a training change.'''
    explains: str        # the part of the system: network, file system, ...
    metric: str
    effect: float        # median(after) / median(before) - 1
    since: float         # the first component run after its change
    nodes: list          # where it got worse

    def describe(self):
        where = f' on {", ".join(self.nodes)}' if self.nodes else ''
        day = time.strftime('%Y-%m-%d', time.gmtime(self.since))
        return (f'likely cause: {self.explains}, {self.metric} '
                f'{100 * self.effect:+.0f}% since {day}{where}')


def _change(runs, metric, direction, interval):
    '''The latest flagged slowdown of *metric* over *runs* (passing, in
    time order) that begins within *interval*, else None.'''
    ok = [r for r in runs if metric in r.metrics]
    found = changes.latest_change([r.metrics[metric].value for r in ok],
                                  [r.time for r in ok], direction > 0)
    if (found and found.flagged and found.worse and
            interval[0] < found.when <= interval[1]):
        return found, ok[found.index:found.index + found.after]
    return None


def _moved(runs, metric, direction, interval):
    '''(effect, since, nodes) of *metric*'s slowdown with the training
    change, else None: per node for a sweep's runs (one slow node of
    several is the finding, and would drown in the others' runs), else
    over all runs, with the nodes of the runs after.'''
    if not all(r.node for r in runs):
        found = _change(runs, metric, direction, interval)
        if not found:
            return None
        change, after = found
        nodes = sorted({r.params.get('job_nodelist', '') for r in after}
                       - {''})
        return change.effect, change.when, nodes
    moved = {}
    for node in sorted({r.node for r in runs}):
        found = _change([r for r in runs if r.node == node],
                        metric, direction, interval)
        if found:
            moved[node] = found[0]
    if not moved:
        return None
    worst = max(moved.values(), key=lambda c: abs(c.effect))
    return worst.effect, min(c.when for c in moved.values()), sorted(moved)


def moved_components(runs, where, interval):
    '''The :class:`Moved` component figures of *runs* on *where* (a
    ``system:partition``) whose slowdown began within *interval* (the
    training case's last run before its change, its first after), the
    largest first.'''
    declared = registry.registered()
    found = []
    for run_group in _component_cases(runs, where, declared).values():
        ok = sorted((r for r in run_group if r.result == 'pass'),
                    key=lambda r: r.time)
        name = run_group[-1].workload
        units = {m: r.metrics[m].unit for r in ok for m in r.metrics}
        for metric, unit in sorted(units.items()):
            direction = metric_direction(metric, unit, name)
            moved = direction and _moved(ok, metric, direction, interval)
            if moved:
                found.append(Moved(declared[name].explains, metric, *moved))
    return sorted(found, key=lambda m: -abs(m.effect))


def _component_cases(runs, where, declared):
    '''The component runs on *where*, by case (``Run.case_here``).'''
    cases = {}
    for run in runs:
        kind = getattr(declared.get(run.workload), 'kind', 'workload')
        if kind == 'component' and run.where == where:
            cases.setdefault(run.case_here, []).append(run)
    return cases


def likely_component(runs, where, interval):
    '''The one-line likely cause of a training change on *where* that
    began within *interval*: the component that moved most with it, or
    ''.'''
    moved = moved_components(runs, where, interval)
    return moved[0].describe() if moved else ''
