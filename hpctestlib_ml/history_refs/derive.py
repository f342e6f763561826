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
  ``FLOOR`` (3 %) keeps a perfectly quiet case from failing on noise it
  never showed in N runs; ``K`` = 4 is chosen from the measured noise of
  this suite's runs (bench/README.md, "Regression detection": 20 real
  runs each of three CPU cases, robust spreads 1.8-4.7 %). No real run
  failed the references of the 10 before it. In histories drawn from those
  runs an unchanged run fails 0.3-0.9 % of the time with K = 4 (1.3-2.0 %
  with K = 3 for the two noisier cases, 0.2-0.35 % with K = 5), and a
  single run 10 % slower fails 16 / 64 / 82 % of the time for spreads of
  4.7 / 2.6 / 1.8 % (K = 3: 33 / 85 / 94 %; K = 5: 8 / 43 / 64 %). K = 4
  halves to thirds K = 3's false alarms for a modest loss of power; a
  drop that one run cannot show is the report's to find, over several;
- each case's loss over its first logged steps (fixed seeds) becomes a
  reference curve with a tolerance per step from the same runs' spread
  (:data:`LOSS_K` x the largest deviation from their median, at least
  :data:`LOSS_FLOOR` of the loss): a run whose curve leaves it fails as a
  numerics regression (:func:`~.lookup.loss_curve_departure`).
"""
import dataclasses
import statistics
import time

from hpctestlib_ml.history_refs import ReferencesError
from hpctestlib_ml.history_refs.lookup import parse_loss_curve

#: Threshold rule: max(FLOOR, K x robust relative spread, second-worst
#: run): the least tolerance, whatever quiet the history shows.
FLOOR = 0.03
#: Robust spreads in the threshold (from the measured noise, above).
K = 4.0
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
    the way its declaration says (:mod:`hpctestlib_ml.workloads`); the
    others by their names and units.'''
    from hpctestlib_ml import workloads
    declared = workloads.registered().get(workload)
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


def robust_spread(values):
    '''1.4826 x median absolute deviation / median: the relative standard
    deviation for normal noise, unmoved by a single odd run.'''
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values)
    return MAD_TO_SIGMA * mad / abs(center) if center else 0.0


def threshold(values, direction=+1):
    '''(reference, relative tolerance, robust spread) of *values*: the
    median, and max(FLOOR, K x robust spread, the second-worst run's
    departure from the median in the worse *direction*). The last term
    keeps a spread underestimated from few runs from failing runs the
    history itself has seen more than once; one odd run does not widen
    it.'''
    spread = robust_spread(values)
    center = statistics.median(values)
    worse = sorted(-direction * (v / center - 1) for v in values) \
        if center else [0.0]
    seen = worse[-2] if len(worse) > 1 else 0.0
    return center, max(FLOOR, K * spread, seen), spread


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
    source: str             # where the runs came from (files)
    loss_curve: dict = None  # {'losses': [...], 'tolerance': [...], 'runs': n}
    workload: str = ''      # the references file it goes to

    def describe(self):
        return (f'median of the last {self.runs} of {self.passing} passing '
                f'runs, {_when(self.first)} .. {_when(self.last)} '
                f'({self.source})')


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
        chosen = passed[-last:]
        metrics, spreads = {}, {}
        names = {n: m.unit for r in chosen for n, m in r.metrics.items()}
        for name, unit in sorted(names.items()):
            direction = metric_direction(name, unit, chosen[-1].workload)
            values = [r.metrics[name].value for r in chosen
                      if name in r.metrics]
            if direction is None or len(values) < min_runs:
                continue
            ref, tolerance, spread = threshold(values, direction)
            tolerance = round(tolerance, 4)
            metrics[name] = ([ref, -tolerance, None, unit] if direction > 0
                             else [ref, None, tolerance, unit])
            spreads[name] = spread
        references.append(CaseReference(
            check, where, case, metrics, spreads, len(chosen), passing,
            chosen[0].time, chosen[-1].time, source,
            _loss_reference(chosen), chosen[-1].workload))
    return references, notes

