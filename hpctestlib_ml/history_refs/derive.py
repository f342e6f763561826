"""The statistics of references from history: per case (a test class
on a ``system:partition`` with one ``reference_case``, logged with every
result) and metric:

- the reference of a metric is the median of the case's last N passing
  runs (default 10), once it has at least ``--min-runs`` (default 5);
- its threshold is ``max(FLOOR, K x robust spread, second-worst run)``
  below the reference for higher-is-better metrics (throughput, MFU) and
  above it for lower-is-better ones (step time, energy per sample), where
  the robust spread is 1.4826 x the median absolute deviation over the
  median (the standard deviation for normal noise, not pulled by one odd
  run) and the second-worst run is the second-largest departure of the N
  runs from their median in the worse direction (a spread estimated from
  few runs can be too small; what the history saw twice is not a
  regression).
  ``FLOOR`` is the noise the partition's site declares
  (``extras['reference_noise_pct']``, logged with each result; the newest
  run's counts), else :data:`DEFAULT_FLOOR` (3 %), which keeps a perfectly
  quiet case from failing on noise it never showed in N runs. ``K`` = 4
  is chosen from the measured noise of this suite's runs (bench/README.md,
  "Regression detection": 20 real runs each of three CPU cases, robust
  spreads 1.8-4.7 %). No real run failed the references of the 10 before
  it. In histories drawn from those runs an unchanged run fails 0.3-0.9 %
  of the time with K = 4 (1.3-2.0 % with K = 3 for the two noisier cases,
  0.2-0.35 % with K = 5), and a single run 10 % slower fails 16 / 64 / 82
  % of the time for spreads of 4.7 / 2.6 / 1.8 % (K = 3: 33 / 85 / 94 %;
  K = 5: 8 / 43 / 64 %). K = 4 halves to thirds K = 3's false alarms for a
  modest loss of power; a drop that one run cannot show is the report's to
  find, over several. A higher-is-better figure's threshold is at most
  :data:`MAX_DROP` (all of it), the most ReFrame accepts;
- the spread and the second-worst run measure only the noise the runs saw:
  runs of one ReFrame session (``--repeat 5``) saw one sitting's, while
  the runs they judge come nights apart (a clean CI run of MegatronGPT
  tiny fell 15.2 % below the median of the five runs just before it). So
  each case counts the sessions its runs span (``session_id``, logged
  with each result; a results-DB run's session), references of one
  session are said to be so, and each threshold says what set it: the
  spread or the second-worst run across N sessions, the site's floor, or
  the default floor (:meth:`CaseReference.describe`: the YAML's comment
  and ``sources``, and the message of a check that fails on it);
- each case's loss over its first logged steps (fixed seeds) becomes a
  reference curve with a tolerance per step from the same runs' spread
  (:data:`LOSS_K` x the largest deviation from their median, at least
  :data:`LOSS_FLOOR` of the loss): a run whose curve leaves it fails as a
  numerics regression (:func:`~.lookup.loss_curve_departure`);
- where a check compares answers (``answer_digest``: the
  ``SilentDataCorruption`` check, :mod:`hpctestlib_ml.answers`), the
  digest each software stack's passing runs agreed on is its known-good
  digest, once at least ``--min-runs`` of them logged it and none logged
  another (:func:`known_answers`): a changed stack gets its own, never an
  alarm.
"""
import collections
import dataclasses
import math
import statistics
import time
import typing

from hpctestlib_ml import answers, registry
from hpctestlib_ml.history_refs import ReferencesError
from hpctestlib_ml.history_refs.lookup import (NOISE_FLOOR_EXTRA,
                                               noise_floor, parse_loss_curve)

#: Threshold rule: max(FLOOR, K x robust relative spread, second-worst
#: run): the least tolerance where the partition declares no noise floor
#: (``extras['reference_noise_pct']``), whatever quiet the history shows.
DEFAULT_FLOOR = 0.03
#: Robust spreads in the threshold (from the measured noise, above).
K = 4.0
#: The widest threshold of a higher-is-better figure: all of it. A wider
#: one (the spread of runs on a loaded machine times K) says nothing more,
#: and ReFrame refuses a lower threshold below -1 ("invalid low threshold
#: value"), failing every figure of the case.
MAX_DROP = 1.0
#: Median absolute deviation -> standard deviation for normal noise.
MAD_TO_SIGMA = 1.4826

#: Passing runs in a reference's median (``--last``).
DEFAULT_LAST = 10
#: Passing runs a case needs for a reference (``--min-runs``).
DEFAULT_MIN_RUNS = 5

#: Loss-curve tolerance per step: LOSS_K x the largest deviation of the
#: reference runs from their median, at least LOSS_FLOOR x |loss|.
LOSS_K = 3.0
#: See :data:`LOSS_K`.
LOSS_FLOOR = 1e-4


def metric_direction(name, unit, workload=None):
    '''+1 where higher is better, -1 where lower is better, None for
    metrics that get no history reference (whole-run times, memory,
    quality, a program's own printed figures). A workload's headline goes
    the way its declaration says (:mod:`hpctestlib_ml.registry`); the
    others by their names and units.'''
    declared = registry.registered().get(workload)
    if declared and declared.headline.metric == name:
        return +1 if declared.headline.higher_is_better else -1
    if name.startswith('printed_') or name == 'hfu':
        return None
    if name == 'mfu':
        return +1
    if name == 'energy_per_sample_J':
        return -1
    if name.startswith('time_per_') and unit == 's':
        return -1
    if name.endswith('_latency_us'):        # a component's (collectives)
        return -1
    if unit.endswith('/s'):
        return +1
    return None


def cannot_be(value):
    '''Why *value* cannot be a rate or a time that was measured ('NaN',
    'infinite', 'zero', 'negative'), else ''. A run that logged such a
    figure had a broken timer or a step that never ran: it is flagged
    where it is read and never made a reference (0 would pass anything,
    infinity fail everything).'''
    if value is None or math.isnan(value):
        return 'NaN'
    if math.isinf(value):
        return 'infinite'
    if value == 0:
        return 'zero'
    return 'negative' if value < 0 else ''


def robust_spread(values):
    '''1.4826 x median absolute deviation / median: the relative standard
    deviation for normal noise, unmoved by a single odd run.'''
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values)
    return MAD_TO_SIGMA * mad / abs(center) if center else 0.0


class Threshold(typing.NamedTuple):
    reference: float        # the median
    tolerance: float        # relative, in the worse direction
    spread: float           # robust relative spread
    set_by: str             # the term that set it: floor, spread or seen


def threshold(values, direction=+1, floor=DEFAULT_FLOOR):
    '''The :class:`Threshold` of *values*: their median, and max(*floor*,
    K x robust spread, the second-worst run's departure from the median in
    the worse *direction*), with the term that set it. The last term
    keeps a spread underestimated from few runs from failing runs the
    history itself has seen more than once; one odd run does not widen
    it.'''
    spread = robust_spread(values)
    center = statistics.median(values)
    worse = sorted(-direction * (v / center - 1) for v in values) \
        if center else [0.0]
    seen = worse[-2] if len(worse) > 1 else 0.0
    terms = {'floor': floor, 'spread': K * spread, 'seen': seen}
    set_by = max(terms, key=terms.get)      # the floor on a tie
    return Threshold(center, terms[set_by], spread, set_by)


def percent(fraction):
    '''*fraction* as the references say it: ``30 %``, ``12.37 %``.'''
    return f'{round(100 * fraction, 2):g} %'


def case_floor(run):
    '''(floor, what it is) of a case whose newest run is *run*: the
    noise floor its partition declared (``reference_noise_pct``, logged
    with the run), else :data:`DEFAULT_FLOOR`.'''
    try:
        declared = noise_floor(run.params.get('reference_noise_pct'))
    except ValueError as err:
        raise ReferencesError(f'{run.name} on {run.where} logged a bad '
                              f'noise floor: {err}; fix or remove that '
                              f'perflog line') from None
    if declared is None:
        return DEFAULT_FLOOR, (f'the default floor {percent(DEFAULT_FLOOR)} '
                               f'({run.where} declares no extras '
                               f"['{NOISE_FLOOR_EXTRA}'])")
    return declared, (f"the site's floor {percent(declared)} (extras "
                      f"['{NOISE_FLOOR_EXTRA}'] of {run.where})")


def session_of(run):
    '''The ReFrame session *run* came from: the one it logged
    (``session_id``), else its results-DB session; None for a run logged
    before either was kept.'''
    return run.params.get('session_id') or run.session or None


@dataclasses.dataclass
class CaseReference:
    check: str              # test class name
    partition: str          # system:partition
    case: str               # reference_case
    metrics: dict           # name -> [ref, lower, upper, unit]
    spreads: dict           # name -> robust relative spread
    runs: int               # passing runs the references come from
    passing: int            # passing runs of the case in the history
    first: float            # time of the first and last run used
    last: float
    source: str             # where the runs came from ('' unsaid)
    loss_curve: dict = None  # {'losses': [...], 'tolerance': [...], 'runs': n}
    workload: str = ''      # the references file it goes to
    sessions: int = 0       # ReFrame sessions the runs span (known ones)
    unlogged: int = 0       # runs that logged no session
    floor: float = DEFAULT_FLOOR
    floor_from: str = ''    # what the floor is (case_floor)
    set_by: dict = dataclasses.field(default_factory=dict)  # name -> term
    capped: list = dataclasses.field(default_factory=list)  # at MAX_DROP
    #: stack id -> {digest, runs, stack}: the known-good digests
    answers: dict = dataclasses.field(default_factory=dict)

    @property
    def single_session(self):
        '''Whether every run came from one ReFrame session (whose
        spread is one sitting's noise, not the nights').'''
        return self.sessions == 1 and not self.unlogged

    def sessions_text(self):
        if self.single_session:
            return ('all from one ReFrame session: their spread is one '
                    "sitting's noise, not the nights'")
        if not self.unlogged:
            return f'from {self.sessions} ReFrame sessions'
        if not self.sessions:
            return 'sessions not logged'
        return (f'from {self.sessions} ReFrame sessions and {self.unlogged} '
                f'runs that logged none')

    def thresholds_text(self):
        '''What set each metric's threshold, grouped, and the floor
        under them all: ``thresholds: the site's floor 30 % (...): mfu,
        tokens_per_second; 4 x robust spread across 6 sessions:
        time_per_iteration_secs 32.4 %``.'''
        across = ('within 1 session' if self.single_session else
                  'of the runs' if self.unlogged else
                  f'across {self.sessions} sessions')
        groups = {}
        for name in sorted(self.metrics):
            by = self.set_by.get(name, 'floor')
            tolerance = self.metrics[name][1] or self.metrics[name][2]
            groups.setdefault(by, []).append(
                name if by == 'floor' else f'{name} {percent(abs(tolerance))}')
        labels = {'floor': self.floor_from,
                  'spread': f'{K:g} x robust spread {across}',
                  'seen': f'second-worst run {across}'}
        text = 'thresholds: ' + '; '.join(
            f'{labels[by]}: {", ".join(names)}'
            for by, names in sorted(groups.items()))
        if 'floor' not in groups:
            text += f'; all above {self.floor_from}'
        if self.capped:
            text += (f'; capped at {percent(MAX_DROP)} (a rate falls no '
                     f'further; the times can still show a slowdown): '
                     f'{", ".join(sorted(self.capped))}')
        return text

    def describe(self):
        '''One line: the runs, their sessions and what set each
        threshold (the YAML's comment and ``sources``, and the message of
        a check that fails on it).'''
        where = f' ({self.source})' if self.source else ''
        return (f'median of the last {self.runs} of {self.passing} passing '
                f'runs, {_when(self.first)} .. {_when(self.last)}{where}, '
                f'{self.sessions_text()}; {self.thresholds_text()}')


def _when(seconds):
    return time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(seconds))


def _loss_reference(runs):
    curves = [c for c in (parse_loss_curve(r.params.get('loss_curve'))
                          for r in runs) if c]
    if len(curves) < 2:
        return None
    points = min(len(c) for c in curves)
    centers, tolerances = [], []
    for i in range(points):
        values = [c[i] for c in curves]
        center = statistics.median(values)
        deviation = max(abs(v - center) for v in values)
        centers.append(center)
        tolerances.append(max(LOSS_K * deviation, LOSS_FLOOR * abs(center)))
    return {'losses': centers, 'tolerance': tolerances, 'runs': len(curves)}


def known_answers(passed, min_runs):
    '''({stack id: {digest, runs, stack}}, notes) of a case's passing
    runs *passed* (in time order) that logged an ``answer_digest``: per
    software stack (:func:`hpctestlib_ml.answers.stack_id`), the digest
    its runs of the newest run's computation version agreed on, where at
    least *min_runs* logged it and none another.'''
    by_stack = collections.defaultdict(list)
    for run in passed:
        digest = (run.params.get('answer_digest') or '').strip()
        if digest and digest not in ('None', 'null'):
            by_stack[answers.stack_id(run.params)].append((run, digest))
    found, notes = {}, []
    for key, logged in sorted(by_stack.items()):
        version = logged[-1][1].split(':')[0]
        digests = collections.Counter(d for _, d in logged
                                      if d.split(':')[0] == version)
        runs = sum(digests.values())
        if len(digests) > 1:
            notes.append(f'answers: {runs} passing runs of one software '
                         f'stack ({key}) logged {len(digests)} digests '
                         f'({", ".join(sorted(digests))}): no known-good '
                         f'one (did something change that the provenance '
                         f'does not show?)')
        elif runs < min_runs:
            notes.append(f'answers: stack {key}: {runs} passing runs, '
                         f'{min_runs} needed (--min-runs) for a known-good '
                         f'digest')
        else:
            found[key] = {'digest': next(iter(digests)), 'runs': runs,
                          'stack': answers.stack(logged[-1][0].params)}
    return found, notes


def since_last_shift(passed, last, min_runs):
    '''(runs, note): the last *last* of *passed* (a case's passing runs in
    time order) after the last shift of its headline figure, its
    outliers left out (:mod:`hpctestlib_ml.report.changes`: the report's
    detector), and what was left out and why; no runs where fewer than
    *min_runs* are left since the shift.'''
    from hpctestlib_ml import changes
    declared = registry.registered().get(passed[-1].workload)
    if declared is None:
        return passed[-last:], ''
    metric = declared.headline.metric
    ok = [r for r in passed if metric in r.metrics
          and not cannot_be(r.metrics[metric].value)]
    if len(ok) < 2 * changes.MIN_SEGMENT:
        return passed[-last:], ''
    found = changes.events([r.metrics[metric].value for r in ok],
                           [r.time for r in ok],
                           declared.headline.higher_is_better,
                           max_history=changes.MAX_HISTORY)
    odd = {id(ok[e.index]) for e in found if e.kind == 'outlier'}
    shifts = [e for e in found if e.kind == 'shift' and e.flagged]
    start = passed.index(ok[shifts[-1].index]) if shifts else 0
    chosen = [r for r in passed[start:] if id(r) not in odd][-last:]
    notes = []
    if shifts:
        shift = shifts[-1]
        notes.append(f'{metric} moved {100 * shift.effect:+.1f}% on '
                     f'{_when(shift.when)}: only the runs since '
                     f'({len(passed) - start}) are used')
    left_out = sum(id(r) in odd for r in passed[start:])
    if left_out:
        notes.append(f'{left_out} odd run(s) left out (outliers)')
    if len(chosen) < min_runs:
        notes.append(f'{len(chosen)} runs left, {min_runs} needed '
                     f'(--min-runs): no reference across a shift')
        return [], '; '.join(notes)
    return chosen, '; '.join(notes)


def derive(runs, last=DEFAULT_LAST, min_runs=DEFAULT_MIN_RUNS, source='',
           totals=None, unkeyed=None):
    '''(references, notes): a :class:`CaseReference` per case with at
    least *min_runs* passing runs, and one line per case or run left out.
    Where *runs* are each case's latest only (the history store), *totals*
    (``Run.case_here`` -> :class:`~hpctestlib_ml.report.recent.CaseTotals`)
    count each case's passing runs and *unkeyed* the runs without a
    ``reference_case``.'''
    if last < 2 or min_runs < 2:
        raise ReferencesError('--last and --min-runs must be at least 2: a '
                              'spread needs two runs')
    groups, counted = {}, 0
    for run in sorted(runs, key=lambda r: r.time):
        if not run.params.get('reference_case'):
            counted += 1
            continue
        _, where, check, case = run.case_here
        groups.setdefault((check, where, case), []).append(run)
    notes = []
    unkeyed = counted if unkeyed is None else unkeyed
    if unkeyed:
        notes.append(f'{unkeyed} runs have no reference_case (written '
                     f'before hpcml logged it): not used')
    references = []
    for (check, where, case), case_runs in sorted(groups.items()):
        passed = [r for r in case_runs if r.result == 'pass']
        whole = (totals.get(case_runs[0].case_here) if totals else None)
        passing = whole.passed if whole else len(passed)
        if passing < min_runs:
            notes.append(f'{check} {where} {case!r}: {passing} passing '
                         f'runs, {min_runs} needed (--min-runs)')
            continue
        chosen, note = since_last_shift(passed, last, min_runs)
        if note:
            notes.append(f'{check} {where} {case!r}: {note}')
        if not chosen:
            continue
        floor, floor_from = case_floor(chosen[-1])
        metrics, spreads, set_by, capped = {}, {}, {}, []
        names = {n: m.unit for r in chosen for n, m in r.metrics.items()}
        for name, unit in sorted(names.items()):
            direction = metric_direction(name, unit, chosen[-1].workload)
            if direction is None:
                continue
            measured = [r.metrics[name].value for r in chosen
                        if name in r.metrics]
            values = [v for v in measured if not cannot_be(v)]
            if len(values) < len(measured):
                reasons = sorted({cannot_be(v) for v in measured} - {''})
                notes.append(
                    f'{check} {where} {case!r}: {name}: '
                    f'{len(measured) - len(values)} of {len(measured)} runs '
                    f'logged a figure that cannot be ({", ".join(reasons)}):'
                    f' left out' + ('' if len(values) >= min_runs else
                                    f'; {len(values)} left, {min_runs} '
                                    f'needed: no reference'))
            if len(values) < min_runs:
                continue
            found = threshold(values, direction, floor)
            tolerance = round(found.tolerance, 4)
            if direction > 0 and tolerance > MAX_DROP:
                tolerance = MAX_DROP
                capped.append(name)
            metrics[name] = ([found.reference, -tolerance, None, unit]
                             if direction > 0 else
                             [found.reference, None, tolerance, unit])
            spreads[name] = found.spread
            set_by[name] = found.set_by
        known, answer_notes = known_answers(passed, min_runs)
        notes += [f'{check} {where} {case!r}: {n}' for n in answer_notes]
        sessions = [session_of(r) for r in chosen]
        references.append(CaseReference(
            check, where, case, metrics, spreads, len(chosen), passing,
            chosen[0].time, chosen[-1].time, source,
            _loss_reference(chosen), chosen[-1].workload,
            sessions=len(set(filter(None, sessions))),
            unlogged=sessions.count(None), floor=floor,
            floor_from=floor_from, set_by=set_by, capped=capped,
            answers=known))
    return references, notes

