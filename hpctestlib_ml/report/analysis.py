"""Figures of a results history: the per-case table, the score against a
baseline, and comparisons.

Each workload has one headline metric and a weight, declared with it
(:class:`hpctestlib_ml.registry.Headline`; a site may weigh them its own
way with ``--weights FILE``); a workload that declares none scores with
its first rate metric (unit ending in ``/s``) and weight 1.
"""
import dataclasses
import difflib
import json
import math
import os
import statistics
import time

from hpctestlib_ml import registry, yaml_files
from hpctestlib_ml.history_refs.derive import cannot_be
from hpctestlib_ml.report import components
from hpctestlib_ml.registry import Headline


class ReportError(ValueError):
    '''Bad input to the report, with the fix.'''


#: The keys of a weights file's entry (:func:`load_weights`).
WEIGHT_KEYS = ('metric', 'better', 'weight')
#: What a weights file holds, as its errors say it.
WEIGHTS_FORMAT = ('workload: {metric: NAME, better: higher|lower, '
                  'weight: W}')


def load_weights(path=None):
    '''Workload -> :class:`~hpctestlib_ml.registry.Headline`: the
    workloads' declared headlines, those of a site's weights file *path*
    (YAML: :data:`WEIGHTS_FORMAT`, each entry checked:
    :func:`_weight_entry`) in place of theirs.'''
    declared = {name: workload.headline
                for name, workload in registry.registered().items()}
    if path is None:
        return declared
    try:
        data = yaml_files.read(path)
    except OSError as err:
        raise ReportError(f'cannot read the weights file {path}: '
                          f'{err.strerror}; pass --weights FILE') from None
    except yaml_files.YamlFileError as err:
        raise ReportError(f'--weights: {err}: fix it, or pass a YAML file of '
                          f'{WEIGHTS_FORMAT}') from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ReportError(f'{path}: give one entry per workload '
                          f'({WEIGHTS_FORMAT}), not a {type(data).__name__}')
    return {**declared, **{str(workload): _weight_entry(path, str(workload),
                                                        entry)
                           for workload, entry in data.items()}}


def _weight_entry(path, workload, entry):
    '''The :class:`Headline` of a weights file's *entry*: a metric name,
    or a mapping of :data:`WEIGHT_KEYS` whose ``better`` is ``higher`` or
    ``lower`` and whose ``weight`` is a number > 0.'''
    if isinstance(entry, str):
        entry = {'metric': entry}
    if not isinstance(entry, dict) or 'metric' not in entry:
        raise ReportError(f'{path}: {workload}: give "metric:" (and '
                          f'optionally "better: higher|lower", "weight:")')
    for key in entry:
        if key not in WEIGHT_KEYS:
            raise ReportError(f'{path}: {workload}: unknown key {key!r}'
                              f'{closest(str(key), WEIGHT_KEYS)}: use '
                              f'{", ".join(WEIGHT_KEYS)}')
    better = entry.get('better', 'higher')
    if better not in ('higher', 'lower'):
        raise ReportError(f'{path}: {workload}: better: {better!r}: use '
                          f'higher or lower')
    weight = entry.get('weight', 1.0)
    if (isinstance(weight, bool) or not isinstance(weight, (int, float))
            or not 0 < weight < math.inf):
        raise ReportError(f'{path}: {workload}: weight: {weight!r}: use a '
                          f'number > 0')
    return Headline(str(entry['metric']), better == 'higher', float(weight))


def closest(name, known):
    '''`` (did you mean X?)`` for the name of *known* closest to *name*,
    else ''.'''
    found = difflib.get_close_matches(name, list(known), n=1)
    return f' (did you mean {found[0]!r}?)' if found else ''


def workload_metrics(runs):
    '''Workload -> the names of the figures its *runs* logged.'''
    found = {}
    for run in runs:
        found.setdefault(run.workload, set()).update(run.metrics)
    return found


def check_weights(path, headlines, logged):
    '''That each workload of the weights file *path* (its *headlines*)
    is one the suite declares or the runs hold, and its metric one its
    runs logged (*logged*: :func:`workload_metrics`), where it has runs;
    :class:`ReportError` naming the closest name otherwise.'''
    names = set(registry.registered()) | set(logged)
    for workload, chosen in headlines.items():
        if workload not in names:
            raise ReportError(f'{path}: unknown workload {workload!r}'
                              f'{closest(workload, names)}: use one of '
                              f'{", ".join(sorted(names))}')
        metrics = logged.get(workload, set())
        if metrics and chosen.metric not in metrics:
            raise ReportError(
                f'{path}: {workload}: metric {chosen.metric!r} is not one its '
                f'runs logged{closest(chosen.metric, metrics)}: use one of '
                f'{", ".join(sorted(metrics))}')


def headline(workload, runs, headlines):
    '''The :class:`Headline` of *workload*, or a rate metric of its runs.'''
    if workload in headlines:
        return headlines[workload]
    for run in runs:
        for name, metric in run.metrics.items():
            if metric.unit.endswith('/s'):
                return Headline(name)
    for run in runs:
        if run.metrics:
            return Headline(next(iter(run.metrics)))
    return None


#: Seconds of the units of a duration (:func:`duration`).
DURATION_UNITS = {'d': 86400, 'h': 3600, 'm': 60}


def duration(text):
    '''Seconds of ``7d``, ``12h``, ``30m``; None if *text* is not one.'''
    if (text and text[-1] in DURATION_UNITS
            and text[:-1].replace('.', '', 1).isdigit()):
        return float(text[:-1]) * DURATION_UNITS[text[-1]]
    return None


def parse_since(text, now=None):
    '''Unix time from ``7d``/``12h``/``30m`` ago or an ISO date.'''
    from hpctestlib_ml.report.history import parse_time
    now = time.time() if now is None else now
    if duration(text) is not None:
        return now - duration(text)
    try:
        return parse_time(text)
    except ValueError:
        raise ReportError(f'time {text!r}: use 7d, 12h, 30m or an ISO date '
                          f'such as 2026-11-01') from None


def select(runs, system=None, partition=None, workload=None, since=None,
           until=None):
    '''Runs matching the filters (``system`` may be ``sys:part``).'''
    if system and ':' in system:
        system, partition = system.split(':', 1)
    return [r for r in runs
            if (not system or r.system == system)
            and (not partition or r.partition == partition)
            and (not workload or r.workload == workload)
            and (since is None or r.time >= since)
            and (until is None or r.time <= until)]


def group(runs, key):
    groups = {}
    for run in sorted(runs, key=lambda r: r.time):
        groups.setdefault(key(run), []).append(run)
    return groups


def passed_values(runs, metric):
    '''*metric*'s values of the runs that passed, in time order, less the
    figures that cannot be (:func:`impossible`).'''
    return [r.metrics[metric].value for r in runs
            if r.result == 'pass' and metric in r.metrics
            and not cannot_be(r.metrics[metric].value)]


def impossible(runs, metric):
    '''A remark on the passing runs whose *metric* (a rate or a time, as
    every headline is) cannot be: ``2 runs logged inf, 0`` (a broken
    timer, a step that never ran), or ''. Such figures are left out of
    every median, change and reference, and said.'''
    odd = [r.metrics[metric].value for r in runs
           if r.result == 'pass' and metric in r.metrics
           and cannot_be(r.metrics[metric].value)]
    if not odd:
        return ''
    shown = ', '.join(sorted({f'{v:g}' for v in odd}))
    return (f'{len(odd)} run(s) logged a figure that cannot be ({shown}): '
            f'left out')


@dataclasses.dataclass
class CaseFigure:
    '''A case on a system:partition and the figure shown for it.'''
    workload: str
    where: str
    case: str
    size: str
    metric: str
    unit: str


@dataclasses.dataclass
class Row(CaseFigure):
    runs: int
    failures: int
    latest: float
    median: float
    minimum: float
    maximum: float
    change: float          # the latest change's effect (see .changes), else
    #                        median of the last N / median of the N before - 1
    ref: float
    status: str            # the latest run's verdict (ReFrame's, references
    #                        included)
    mfu: float = None      # medians of the last N passing runs
    energy: float = None   # energy_per_sample_J
    detected: object = None  # the latest .changes.Change, or None
    cause: str = ''        # provenance differences across a flagged change
    component: str = ''    # the component benchmark that moved with it
    others: list = dataclasses.field(default_factory=list)  # noise,
    #                        silence, the newest run odd (.changes events)
    impossible: str = ''   # a remark on figures that cannot be

    @property
    def flagged(self):
        return bool(self.detected and self.detected.flagged)


def _recent_median(runs, metric, last):
    values = passed_values(runs, metric)[-last:]
    return statistics.median(values) if values else None


def detect_change(case_runs, chosen, last=10, now=None):
    '''(:class:`~.changes.Change` or None, cause line, the interval a
    component's change must begin in to have come with it: the case's last
    run before its change to its second run after, or None, the other
    events worth a line: changes of spread, silence judged at *now*, the
    newest run odd) of one case's headline metric over its passing
    runs.'''
    from hpctestlib_ml import changes
    from hpctestlib_ml.report import causes
    ok = [r for r in case_runs if r.result == 'pass'
          and chosen.metric in r.metrics
          and not cannot_be(r.metrics[chosen.metric].value)]
    values = [r.metrics[chosen.metric].value for r in ok]
    found_events = changes.events(values, [r.time for r in ok],
                                  chosen.higher_is_better, now=now,
                                  window=last,
                                  max_history=changes.MAX_HISTORY)
    shifts = [e for e in found_events if e.kind == 'shift']
    found = shifts[-1] if shifts else None
    others = [e for e in found_events if e.kind in ('noise', 'silent') or
              (e.kind == 'outlier' and e.index == len(values) - 1)]
    if not found or not found.flagged:
        return found, '', None, others
    before = ok[found.index - found.before:found.index]
    after = ok[found.index:found.index + found.after]
    # The interval a component's change may begin in to have come with
    # it: one night's cases run one after another in either order, so a
    # component's first slow run may come before the case's first slow
    # run, or after it and before its next one.
    return (found, causes.likely_cause(before, after),
            (before[-1].time, after[min(1, len(after) - 1)].time), others)


def _by_label(item):
    '''Sort key of a :attr:`~.history.Run.case_here` group: workload,
    partition, then the name and size the table shows.'''
    key, case_runs = item
    latest = case_runs[-1]
    return (key[:2], latest.name, latest.params.get('resolved_size', ''),
            key)


def table(runs, headlines, last=10, totals=None, component_runs=None):
    '''One :class:`Row` per case on a system:partition
    (:attr:`~.history.Run.case_here`), named by its latest run. Where
    *runs* are each case's latest only (the history store,
    :mod:`.recent`), *totals* give each case's runs, failures, least and
    greatest value over all its runs, and *component_runs* (where ->
    runs) the component runs a change's likely cause is searched in. A
    case is silent (:mod:`hpctestlib_ml.changes`) where the other cases of its
    system:partition ran long after its own last run: the history's
    newest run there is the night it is judged at, not the clock.'''
    rows = []
    newest = {}
    for r in runs:
        newest[r.where] = max(newest.get(r.where, r.time), r.time)
    for (workload, where, *rest), case_runs in sorted(group(
            runs, lambda r: r.case_here).items(), key=_by_label):
        whole = totals.get((workload, where, *rest)) if totals else None
        name = case_runs[-1].name
        size = case_runs[-1].params.get('resolved_size', '')
        chosen = headline(workload, case_runs, headlines)
        if chosen is None:
            continue
        values = passed_values(case_runs, chosen.metric)
        failures = sum(r.result != 'pass' for r in case_runs)
        recent, before = values[-last:], values[-2 * last:-last]
        latest_metric = next((r.metrics[chosen.metric] for r in
                              reversed(case_runs)
                              if chosen.metric in r.metrics), None)
        detected, cause, began, others = detect_change(
            case_runs, chosen, last, newest.get(where))
        component = (components.likely_component(
            component_runs(where) if component_runs else runs, where, began)
            if began and _is_training(workload) else '')
        if detected:
            change = detected.effect
        else:
            change = (statistics.median(recent) / statistics.median(before)
                      - 1 if recent and before and statistics.median(before)
                      else None)
        count, minimum, maximum = (
            len(case_runs), min(values) if values else None,
            max(values) if values else None)
        if whole:
            count, failures = whole.runs, whole.failures
            minimum, maximum = whole.minimum, whole.maximum
        rows.append(Row(
            workload, where, name, size, chosen.metric,
            latest_metric.unit if latest_metric else '', count,
            failures, values[-1] if values else None,
            statistics.median(recent) if recent else None, minimum, maximum,
            change, latest_metric.ref if latest_metric else 0.0,
            case_runs[-1].result, _recent_median(case_runs, 'mfu', last),
            _recent_median(case_runs, 'energy_per_sample_J', last),
            detected, cause, component, others,
            impossible(case_runs, chosen.metric)))
    return rows


def _is_training(workload):
    '''Whether *workload* trains a model (a component benchmark is not
    explained by the other components).'''
    declared = registry.registered().get(workload)
    return getattr(declared, 'kind', 'workload') == 'workload'


# The score

@dataclasses.dataclass
class CaseStats:
    metric: str
    unit: str
    higher_is_better: bool
    runs: int
    failures: int
    perf: float          # median of the passed runs' values
    rel_std: float       # their standard deviation / mean
    perf_adj: float      # perf x (1 - rel_std) x (1 - failures/runs), as a
    #                      "higher is better" figure


def case_stats(runs, headlines, figures=None):
    '''Case key (``workload|display name|size``) -> :class:`CaseStats`.
    *figures*: case -> (passing headline values > 0, runs, failures, the
    first run with the headline) of cases whose runs are not in *runs*
    (the history store: :func:`.recent.case_values`).'''
    stats = {}
    for case, case_runs in group(runs, lambda r: r.case).items():
        chosen = headline(case[0], case_runs, headlines)
        if chosen is None:
            continue
        values = [v for v in passed_values(case_runs, chosen.metric)
                  if v > 0]
        first = next((r for r in case_runs if chosen.metric in r.metrics),
                     None)
        _add_stats(stats, case, chosen, values, len(case_runs),
                   sum(r.result != 'pass' for r in case_runs), first)
    for case, (values, n, failures, first) in (figures or {}).items():
        chosen = headlines[case[0]]
        _add_stats(stats, case, chosen, list(values), n, failures, first)
    return stats


def _add_stats(stats, case, chosen, values, n, failures, first):
    '''*case*'s :class:`CaseStats` in *stats*, from its passing values
    > 0 of the headline *chosen*, its runs and failures, and its first
    run with the headline (whose unit it takes).'''
    key = '|'.join(case)
    if not values:
        stats[key] = CaseStats(chosen.metric, '', chosen.higher_is_better,
                               n, failures, None, None, 0.0)
        return
    perf = statistics.median(values)
    mean = statistics.fmean(values)
    rel_std = statistics.pstdev(values) / mean if len(values) > 1 else 0.0
    oriented = perf if chosen.higher_is_better else 1 / perf
    perf_adj = oriented * max(0.0, 1 - rel_std) * (1 - failures / n)
    unit = first.metrics[chosen.metric].unit
    stats[key] = CaseStats(chosen.metric, unit, chosen.higher_is_better, n,
                           failures, perf, rel_std, perf_adj)


@dataclasses.dataclass
class Score:
    per_case: dict        # case key -> ratio
    per_workload: dict    # workload -> geometric mean of its cases' ratios
    overall: float        # weighted geometric mean of per_workload's
    #                       training workloads
    missing: list         # baseline cases without a comparable run here
    components: list = dataclasses.field(default_factory=list)
    #                       per_workload's component benchmarks, kept out
    #                       of overall


def score(stats, baseline, headlines):
    '''Ratios of *stats* to *baseline* (both from :func:`case_stats`);
    ratio > 1: better than the baseline. A case that failed every run here
    scores 0 and pulls its workload to 0: it is reported, not dropped.'''
    per_case, missing = {}, []
    for key, base in baseline.items():
        here = stats.get(key)
        if (here is None or not base.perf_adj or here.metric != base.metric
                or here.higher_is_better != base.higher_is_better):
            missing.append(key)
            continue
        per_case[key] = here.perf_adj / base.perf_adj
    per_workload = {}
    for key, ratio in per_case.items():
        per_workload.setdefault(key.split('|')[0], []).append(ratio)
    per_workload = {w: _geomean(r) for w, r in per_workload.items()}
    components = sorted(w for w in per_workload if _is_component(w))
    return Score(per_case, per_workload,
                 _overall({w: v for w, v in per_workload.items()
                           if w not in components}, headlines),
                 sorted(missing), components)


def _is_component(workload):
    '''Whether *workload* is a component benchmark (its declaration's
    ``kind``): the overall score asks how the system trains, so the
    components' own ratios are shown beside it, not in it.'''
    declared = registry.registered().get(workload)
    return bool(declared and declared.kind == 'component')


def _overall(per_workload, headlines):
    '''The weighted geometric mean of *per_workload*; 0 where one is 0;
    None where there is nothing to weigh.'''
    weights = {w: headlines[w].weight if w in headlines else 1.0
               for w in per_workload}
    total = sum(weights.values())
    if not per_workload or not total:
        return None
    if any(v == 0 for v in per_workload.values()):
        return 0.0
    return math.exp(sum(weights[w] * math.log(v)
                        for w, v in per_workload.items()) / total)


def _geomean(values):
    if any(v == 0 for v in values):
        return 0.0
    return math.exp(statistics.fmean(math.log(v) for v in values))


# Baselines

def baseline_path(name, var_dir):
    '''A baseline file: *name* itself if it is a path to one, else
    ``<var_dir>/baselines/<name>.json``.'''
    if name.endswith('.json') or os.sep in name:
        return name
    return os.path.join(var_dir, 'baselines', f'{name}.json')


def check_baseline_target(name, path, system=None, replace=False):
    '''Refuse to save a baseline *name* at *path* where that would replace
    anything but a baseline (a perflog, a report: results already
    written), or, unless *replace*, the baseline of another selection of
    systems than *system* (``--system``; None: every system): a later
    ``--baseline NAME`` would score against the other system without a
    word (issue 39). The same selection's baseline may be replaced, and so
    may one saved before baselines named theirs.'''
    if not os.path.lexists(path):
        return
    try:
        _, data = load_baseline(path)
    except ReportError:
        raise ReportError(
            f'--save-baseline {name}: {path} is there and is not a baseline '
            f'of hpcml report, so saving would destroy it: give another name '
            f'or path (nothing was written)') from None
    if replace or 'system' not in data or data['system'] == system:
        return
    other = _systems(data['system'])
    suffix = (system or 'all').replace(':', '-')
    raise ReportError(
        f'--save-baseline {name}: {path} holds the baseline of {other} '
        f'(saved {data.get("created", "before")}), and this report selects '
        f'{_systems(system)}: give another name (e.g. {name}-{suffix}), or '
        f'add --replace-baseline to replace it (nothing was written)')


def _systems(system):
    '''The ``--system`` a baseline was saved with, in words.'''
    return f'--system {system}' if system else 'every system'


def save_baseline(path, stats, description, headlines=None, system=None):
    '''Save *stats* (:func:`case_stats`) as a baseline at *path*, with the
    *headlines* they were figured with (their workloads'), so that a score
    against it uses them (:func:`baseline_headlines`), and the ``--system``
    its runs were selected by (None: every system;
    :func:`check_baseline_target`).'''
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    used = {key.split('|')[0] for key in stats}
    data = {'format': 'hpcml-baseline-1', 'description': description,
            'created': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
            'system': system,
            'cases': {k: dataclasses.asdict(v) for k, v in stats.items()},
            'headlines': {w: dataclasses.asdict(h) for w, h in
                          sorted((headlines or {}).items()) if w in used}}
    partial = f'{path}.partial'
    with open(partial, 'w') as fp:
        json.dump(data, fp, indent=1, sort_keys=True)
    os.replace(partial, path)       # an old baseline is never half-written


def load_baseline(path):
    try:
        with open(path) as fp:
            data = json.load(fp)
    except OSError as err:
        raise ReportError(f'no baseline at {path} ({err.strerror}): make one '
                          f'with hpcml report --save-baseline NAME') from None
    except ValueError as err:
        raise ReportError(f'{path} is not a baseline file ({err})') from None
    if not isinstance(data, dict) or data.get('format') != 'hpcml-baseline-1':
        raise ReportError(f'{path} is not a baseline file of hpcml report')
    return {k: CaseStats(**v) for k, v in data['cases'].items()}, data


def baseline_headlines(cases, data):
    '''Workload -> the :class:`Headline` a baseline (its *cases* and
    file *data*, :func:`load_baseline`) was figured with: as saved, or,
    in a baseline saved before they were, its cases' metric and
    orientation with the declared weight.'''
    found = {w: Headline(**h) for w, h in data.get('headlines', {}).items()}
    declared = registry.registered()
    for key, case in sorted(cases.items()):
        workload = key.split('|')[0]
        if workload not in found:
            weight = (declared[workload].headline.weight
                      if workload in declared else 1.0)
            found[workload] = Headline(case.metric, case.higher_is_better,
                                       weight)
    return found


def _better(chosen):
    return 'higher' if chosen.higher_is_better else 'lower'


def headline_disagreements(headlines, saved):
    '''One line per workload whose metric or orientation in *headlines*
    differs from the baseline's *saved* ones (:func:`baseline_headlines`);
    [] where they agree.'''
    return [f'{w}: {h.metric} {_better(h)} is better, the baseline '
            f'{saved[w].metric} {_better(saved[w])} is better'
            for w, h in sorted(headlines.items())
            if w in saved and (h.metric, h.higher_is_better) !=
            (saved[w].metric, saved[w].higher_is_better)]


# Comparisons

def compare(runs_a, runs_b, headlines):
    '''(case key, stats A, stats B, ratio B/A) for cases in both.'''
    return compare_stats(case_stats(runs_a, headlines),
                         case_stats(runs_b, headlines))


def compare_stats(a, b):
    ''':func:`compare` of two sides' :func:`case_stats`.'''
    rows = []
    for key in sorted(set(a) & set(b)):
        if a[key].perf_adj and b[key].perf is not None:
            rows.append((key, a[key], b[key], b[key].perf_adj / a[key].perf_adj))
    return rows
