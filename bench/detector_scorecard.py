#!/usr/bin/env python3
"""The suite's change detector beside Apache Otava, on the same series
(issue 38): where each finds a change, how often it cries wolf on a nightly
report, and how close it comes to the statistical limit.

Apache Otava (incubating; e-divisive means with the merge step of Fleming
et al., ICPE 2023) and its labelled corpus generator are not dependencies
of the suite. Install them beside it, leaving the environment's numpy alone
(``var/`` is git-ignored)::

    .venv/bin/python -m pip install --no-deps --target var/otava \\
        apache-otava==0.8.0 otava-test-data==0.1.9

then, from the repository root::

    .venv/bin/python bench/detector_scorecard.py [--quick] [--seed N]
        [--only otava|suite] [--corpus otava|nightly|all]
        [--markdown FILE] [--json FILE] [--otava-dir var/otava]

Otava is needed unless ``--only suite --corpus nightly``; where it is
missing the harness says how to install it in one line and exits 2.

Detectors
---------
- *suite*: ``hpctestlib_ml.changes.events(values, times=None,
  higher_is_better=True)``; a detection of a mean shift is an event of kind
  ``shift`` with ``flagged`` true (``worse`` gives its direction); its
  ``noise`` and ``outlier`` events are scored against the variance and
  outlier truths. (The detector before issue 38 was scored through an
  adapter over its change points: ``bench/README.md`` keeps its row.)
- *otava*: ``otava.analysis.compute_change_points(series, window_len=30,
  max_pvalue=0.001, min_magnitude=0.05)``; every change point it returns is
  a detection, dated at ``.index``, slower where ``stats.
  forward_rel_change()`` is below 0 (all series here are higher-is-better).
  ``min_magnitude`` 0.05 (relative change) matches the suite's 5 %
  practical threshold (``changes.MIN_CHANGE``); it is used throughout.

Corpora
-------
1. *otava*: otava-test-data's generators (0.1.9), every pattern, lengths
   30, 50, 100, 200, 500, several seeds; level 100, Gaussian noise sigma 2
   (2 % of the level, ``--sigma``), mean shifts of 3, 4, 6 or 10 sigma (6 to
   20 %, above both detectors' 5 % threshold), up or down; outliers 10
   sigma; variance changes by 3 or 5 times, up or down; banding between the
   level and +2.5 sigma; a phase change of a 5-sigma, 20-run cosine. Mean
   shifts are the change types ``step``, ``regression_start`` and
   ``regression_end``; ``variance`` truths score the suite's ``noise``
   events and ``outlier`` truths its ``outlier`` events; ``phase`` truths
   are no change of mean (any detection there is false). ``combine``: every
   pair of outlier, step_function, regression_fix, banding, variance_change
   and multiple_changes added (lengths 50 and up), truths at least 5 runs
   apart.
2. *nightly*: histories with the suite's measured noise. The measured runs
   behind ``bench/results/regression_noise_2026-11-25.json`` are not in the
   repository (only their summaries), and the GPU validations under
   ``bench/results/gpuval-*`` hold one to three runs per case, so the noise
   is Gaussian at the measured robust spreads (1.8 % MegatronGPT tiny,
   2.6 % DeepLabV3Plus, 4.7 % CosmoFlow; and 2 %). Changed histories: 20
   runs before (and 50, for the 10 % slowdown), then 10 runs multiplied by
   1 - x (a slowdown of x, x = 3, 5, 10, 20 %) or 1 + x (a speed-up); each
   is judged as the nightly report would each night with 1..10 runs after
   the change. Unchanged histories: 20 to 50 runs.

Scores
------
Matching: a detection matches a labelled change within 2 runs; each
truth and each detection is matched at most once (closest pairs first).

- precision, recall and F1 over the labelled mean shifts, per pattern
  family and pooled; a changed nightly history enters once, judged with a
  number of runs after the change drawn from 1..10; an unchanged one enters
  once, judged whole. Detections matched to no mean shift are false
  (``false near`` names the phase, variance and outlier truths they sat
  within 2 runs of). ``wrong way``: matched, but in the wrong direction;
- the suite's ``noise`` and ``outlier`` events (every event of the kind,
  flagged or not) against the ``variance`` and ``outlier`` truths, the same
  matching;
- false alarms per 1,000 case-nights. The rule: each unchanged history of
  L runs gives the nights n = 10..L; on night n the detector judges the
  first n runs afresh; the night is a *slowdown alarm* when that judgment
  holds at least one detection in the slower direction (suite: a flagged
  ``shift`` event with ``worse`` true; Otava: a change point whose
  forward relative change is below 0), wherever in the n runs it is dated;
  it is a *false change* when it holds any detection, either way. A false
  change that persists counts again on each night it shows;
- detection of a slowdown after M runs: the judgment of the first N + M
  runs holds a slower-direction detection within 2 runs of the first
  slowed run; *delay*: the M of the first night it does (M <= 10); *dated
  exactly*: that first detection dated at the first slowed run. A speed-up
  is *seen as faster* by a faster-direction detection within 2 runs; a
  speed-up night that holds any slowdown alarm is counted against the
  detector;
- the limit beside each rate: the power of a one-sided z-test, known
  sigma, of the mean of the M runs after against the N before,
  Phi(delta / (sigma sqrt(1/M + 1/N)) - z(1 - alpha)), at alpha = the
  detector's own slowdown-alarm rate per night at that spread ((alarms +
  0.5) / nights, so that none measured gives a finite rate) and at 0.1 %.

Deterministic for a given ``--seed``. Each detector's seconds are summed
around its calls only.
"""
import argparse
import dataclasses
import importlib
import json
import math
import os
import statistics
import sys
import time
import warnings

import numpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from hpctestlib_ml import changes  # noqa: E402

#: A detection matches a truth this many runs away or nearer.
TOLERANCE = 2
SHIFT_TYPES = frozenset({'step', 'regression_start', 'regression_end'})
NOISE_TYPES = frozenset({'variance'})
OUTLIER_TYPES = frozenset({'outlier'})
LEVEL = 100.0
OTAVA_PINS = 'apache-otava==0.8.0 otava-test-data==0.1.9'

#: Generated patterns, and the pairs of them added in ``combine``.
PATTERNS = ('constant', 'noise_normal', 'noise_uniform', 'outlier',
            'multiple_outliers', 'step_function', 'regression_fix',
            'multiple_changes', 'banding', 'variance_change',
            'multiple_variance_changes', 'phase_change')
COMBINABLE = ('outlier', 'step_function', 'regression_fix', 'banding',
              'variance_change', 'multiple_changes')
LENGTHS = (30, 50, 100, 200, 500)
#: Mean shifts in noise sigmas.
SHIFT_SIGMAS = (3, 4, 6, 10)
OUTLIER_SIGMAS = 10
VARIANCE_RATIOS = (3, 5)
BAND_SIGMAS = 2.5
PHASE_SIGMAS = 5

#: Robust spreads measured on this machine (bench/README.md), and 2 %.
SPREADS = (0.018, 0.02, 0.026, 0.047)
EFFECTS = (0.03, 0.05, 0.10, 0.20)
RUNS_BEFORE = 20
#: Longer histories before, for this slowdown only.
LONG_BEFORE = (50, 0.10)
MAX_AFTER = 10
MIN_NIGHT = 10
UNCHANGED_LENGTHS = (20, 50)
TABLE_AFTER = (3, 5, 10)
ALPHA_LIMIT = 0.001

QUICK = dict(seeds=1, combine_seeds=1, combine_lengths=(50, 200),
             trials=8, histories=25)
DEFAULT = dict(seeds=4, combine_seeds=2, combine_lengths=(50, 100, 200, 500),
               trials=40, histories=120)


@dataclasses.dataclass
class Detection:
    kind: str
    index: int
    flagged: bool
    worse: object       # True, False, or None (no direction)
    effect: float


@dataclasses.dataclass
class Case:
    corpus: str
    family: str
    name: str
    values: list
    truths: list        # [(index, change_type, worse or None)]
    meta: dict = dataclasses.field(default_factory=dict)


# -- detectors ------------------------------------------------------------

class Suite:
    name = 'suite'

    def __init__(self):
        self.seconds = 0.0
        self.calls = 0
        self.api = 'hpctestlib_ml.changes.events'

    def detect(self, values):
        values = [float(v) for v in values]
        start = time.perf_counter()
        found = [Detection(str(e.kind), int(e.index), bool(e.flagged),
                           e.worse if e.worse is None else bool(e.worse),
                           float(e.effect))
                 for e in changes.events(values, times=None,
                                         higher_is_better=True)]
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return found

    @staticmethod
    def shifts(found):
        return [d for d in found if d.kind == 'shift' and d.flagged]


class Otava:
    name = 'otava'

    def __init__(self, analysis, window_len, max_pvalue, min_magnitude):
        self.analysis = analysis
        self.settings = dict(window_len=window_len, max_pvalue=max_pvalue,
                             min_magnitude=min_magnitude)
        self.seconds = 0.0
        self.calls = 0
        self.api = 'otava.analysis.compute_change_points'

    def detect(self, values):
        series = [float(v) for v in values]
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            points, _ = self.analysis.compute_change_points(
                series, **self.settings)
            found = []
            for cp in points:
                effect = float(cp.stats.forward_rel_change())
                found.append(Detection('shift', int(cp.index), True,
                                       effect < 0, effect))
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return found

    @staticmethod
    def shifts(found):
        return found


def load_otava(otava_dir):
    '''(otava.analysis, otava_test_data.generators) from *otava_dir*, or
    None where they are not there.'''
    if otava_dir not in sys.path:
        sys.path.insert(1, otava_dir)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            analysis = importlib.import_module('otava.analysis')
            generators = importlib.import_module(
                'otava_test_data.generators')
            importlib.import_module('otava_test_data.generators.advanced')
            importlib.import_module('otava_test_data.generators.combiner')
    except ImportError:
        return None
    return analysis, generators


def install_line(otava_dir):
    return (f'Apache Otava is not installed in {otava_dir}: '
            f'{sys.executable} -m pip install --no-deps --target '
            f'{otava_dir} {OTAVA_PINS}')


# -- matching and scores --------------------------------------------------

def match(truths, found, tolerance=TOLERANCE):
    '''{truth position: detection position}: pairs within *tolerance*
    runs, closest first, each side used at most once.'''
    pairs = sorted((abs(t - d), i, j) for i, t in enumerate(truths)
                   for j, d in enumerate(found) if abs(t - d) <= tolerance)
    used, matched = set(), {}
    for _, i, j in pairs:
        if i not in matched and j not in used:
            matched[i] = j
            used.add(j)
    return matched


def prf(tp, fp, fn):
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else None
    return precision, recall, f1


def z_power(delta, sigma, after, before, alpha):
    '''Power of the one-sided z-test, known *sigma*, of the mean of
    *after* runs against the mean of *before* runs, for a drop *delta*.'''
    if alpha <= 0:
        return 0.0
    if alpha >= 1:
        return 1.0
    nd = statistics.NormalDist()
    z = delta / (sigma * math.sqrt(1 / after + 1 / before))
    return nd.cdf(z - nd.inv_cdf(1 - alpha))


def t_power(delta, sigma, after, before, alpha):
    '''Power of the one-sided two-sample t-test, the spread estimated from
    the *before* runs (N - 1 degrees of freedom) as a detector must, at a
    change whose run it is told: the limit of any detector that knows no
    spread but the history's. Non-central t (scipy: the harness only).'''
    from scipy import stats
    if alpha <= 0:
        return 0.0
    if alpha >= 1:
        return 1.0
    df = before - 1
    ncp = delta / (sigma * math.sqrt(1 / after + 1 / before))
    return float(stats.nct.sf(stats.t.isf(alpha, df), df, ncp))


class Tally:
    '''Counts of one detector on one family.'''

    def __init__(self):
        self.series = self.truths = self.tp = self.fp = self.fn = 0
        self.wrong_way = 0
        self.false_near = {}
        self.lengths = {}

    def add(self, tp, fp, fn, wrong_way=0, near=(), length=None):
        self.series += 1
        self.truths += tp + fn
        self.tp += tp
        self.fp += fp
        self.fn += fn
        self.wrong_way += wrong_way
        for kind in near:
            self.false_near[kind] = self.false_near.get(kind, 0) + 1
        if length is not None:
            row = self.lengths.setdefault(str(length), [0, 0, 0])
            row[0] += tp
            row[1] += fp
            row[2] += fn

    def merge(self, other):
        self.series += other.series
        self.truths += other.truths
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.wrong_way += other.wrong_way
        for k, v in other.false_near.items():
            self.false_near[k] = self.false_near.get(k, 0) + v

    def as_dict(self):
        p, r, f = prf(self.tp, self.fp, self.fn)
        out = {'series': self.series, 'truths': self.truths, 'tp': self.tp,
               'fp': self.fp, 'fn': self.fn, 'precision': p, 'recall': r,
               'f1': f, 'wrong_way': self.wrong_way,
               'false_near': dict(sorted(self.false_near.items()))}
        if self.lengths:
            out['by_length'] = {
                k: dict(zip(('tp', 'fp', 'fn', 'f1'),
                            (*v, prf(*v)[2])))
                for k, v in sorted(self.lengths.items(), key=lambda kv:
                                   int(kv[0]))}
        return out


def score_shifts(case, shifts):
    '''(tp, fp, fn, wrong way, kinds of other truths near the false ones)
    of mean-shift detections *shifts* on *case*.'''
    truths = [(i, worse) for i, kind, worse in case.truths
              if kind in SHIFT_TYPES]
    matched = match([i for i, _ in truths], [d.index for d in shifts])
    wrong = sum(1 for i, j in matched.items()
                if truths[i][1] is not None and shifts[j].worse is not None
                and bool(shifts[j].worse) != bool(truths[i][1]))
    used = set(matched.values())
    others = [(i, kind) for i, kind, _ in case.truths
              if kind not in SHIFT_TYPES]
    near = []
    for j, d in enumerate(shifts):
        if j in used:
            continue
        kinds = sorted({k for i, k in others if abs(i - d.index) <=
                        TOLERANCE})
        near.extend(kinds)
    tp = len(matched)
    return tp, len(shifts) - tp, len(truths) - tp, wrong, near


def score_kind(case, found, kind, truth_types):
    truths = [i for i, t, _ in case.truths if t in truth_types]
    events = [d.index for d in found if d.kind == kind]
    tp = len(match(truths, events))
    return tp, len(events) - tp, len(truths) - tp


# -- corpus 1: otava-test-data --------------------------------------------

class Patterns:
    '''Builders of otava-test-data series with this harness's settings:
    each returns the library's TimeSeries, at *base* with noise *noise*,
    its changes kept at least 5 runs from *avoid*.'''

    def __init__(self, generators, sigma):
        from otava_test_data.generators import advanced, basic, combiner
        self.g, self.basic, self.advanced = generators, basic, advanced
        self.combiner = combiner
        self.s = sigma

    @staticmethod
    def seed(rng):
        return int(rng.integers(2 ** 31))

    @staticmethod
    def pick(rng, lo, hi, avoid, gap=5, also=()):
        for _ in range(200):
            i = int(rng.integers(lo, hi))
            if all(abs(i + o - a) >= gap for a in avoid for o in (0, *also)):
                return i
        raise ValueError(f'no room for a change in {lo}..{hi} away from '
                         f'{sorted(avoid)}')

    def shift(self, rng):
        return (float(rng.choice(SHIFT_SIGMAS)) * self.s *
                (1 if rng.random() < 0.5 else -1))

    def margin(self, length):
        return max(3, length // 5)

    def build(self, name, length, rng, base=LEVEL, noise=None, avoid=()):
        noise = self.s if noise is None else noise
        s, m, g = self.s, self.margin(length), self.g
        if name == 'constant':
            return g.constant(length, base)
        if name == 'noise_normal':
            return g.noise_normal(length, base, s, self.seed(rng))
        if name == 'noise_uniform':
            half = math.sqrt(3) * s
            return g.noise_uniform(length, base - half, base + half,
                                   self.seed(rng))
        if name == 'outlier':
            sign = 1 if rng.random() < 0.5 else -1
            return g.outlier(length, base, base + sign * OUTLIER_SIGMAS * s,
                             self.pick(rng, m, length - m, avoid), noise,
                             self.seed(rng))
        if name == 'multiple_outliers':
            sign = 1 if rng.random() < 0.5 else -1
            count = max(2, length // 50)
            where = []
            for _ in range(count):
                where.append(self.pick(rng, 2, length - 2,
                                       list(avoid) + where, gap=3))
            return self.advanced.multiple_outliers(
                length, base, base + sign * OUTLIER_SIGMAS * s,
                sorted(where), sigma=noise, seed=self.seed(rng))
        if name == 'step_function':
            return g.step_function(length, base, base + self.shift(rng),
                                   self.pick(rng, m, length - m, avoid),
                                   noise, self.seed(rng))
        if name == 'regression_fix':
            durations = [d for d in (5, 10, 20) if d <= length // 3]
            for duration in rng.permutation(durations):
                duration = int(duration)
                try:
                    start = self.pick(rng, m, length - m - duration, avoid,
                                      also=(duration,))
                    break
                except ValueError:
                    continue
            else:
                raise ValueError(f'no room for a regression in {length} '
                                 f'runs away from {sorted(avoid)}')
            return g.regression_fix(length, base, base + self.shift(rng),
                                    None, start, duration, noise,
                                    self.seed(rng))
        if name == 'multiple_changes':
            values = [base]
            for _ in range(3):
                values.append(values[-1] + self.shift(rng))
            return g.multiple_changes(length, values, None, noise,
                                      self.seed(rng))
        if name == 'banding':
            return g.banding(length, base, base + BAND_SIGMAS * s, noise,
                             self.seed(rng))
        if name == 'variance_change':
            ratio = float(rng.choice(VARIANCE_RATIOS))
            low, high = (noise, ratio * s) if noise else (0.0, ratio * s)
            if rng.random() < 0.5:
                low, high = high, low
            return g.variance_change(length, base, low, high,
                                     self.pick(rng, m, length - m, avoid),
                                     self.seed(rng))
        if name == 'multiple_variance_changes':
            return self.advanced.multiple_variance_changes(
                length, base, [s, 4 * s, 1.5 * s, 5 * s], None,
                self.seed(rng))
        if name == 'phase_change':
            return g.phase_change(length, PHASE_SIGMAS * s, base, 20,
                                  self.pick(rng, m, length - m, avoid),
                                  math.pi / 2, noise, self.seed(rng))
        raise ValueError(name)

    def combined(self, first, second, length, rng):
        # Fixed positions (multiple_changes') first, the other avoids them.
        if second == 'multiple_changes':
            first, second = second, first
        a = self.build(first, length, rng, base=0.0, noise=0.0)
        b = self.build(second, length, rng, base=0.0, noise=0.0,
                       avoid=a.get_change_point_indices())
        level = self.g.constant(length, LEVEL)
        series = self.combiner.combine(a, b, level)
        return self.combiner.add_noise(series, self.s, 'normal',
                                       self.seed(rng))


def truths_of(ts):
    out = []
    for cp in ts.change_points:
        worse = None
        if (cp.change_type in SHIFT_TYPES and cp.before_value is not None
                and cp.after_value is not None):
            worse = cp.after_value < cp.before_value    # higher is better
        out.append((int(cp.index), cp.change_type, worse))
    return sorted(out)


def otava_corpus(generators, sigma, seeds, combine_seeds, combine_lengths,
                 seed):
    patterns = Patterns(generators, sigma)
    cases = []
    for p_number, name in enumerate(PATTERNS):
        for length in LENGTHS:
            for s in range(seeds):
                rng = numpy.random.default_rng([seed, 1, p_number, length,
                                                s])
                ts = patterns.build(name, length, rng)
                cases.append(Case('otava', name, f'{name}/L{length}/s{s}',
                                  [float(v) for v in ts.data],
                                  truths_of(ts), {'length': length}))
    pairs = [(a, b) for i, a in enumerate(COMBINABLE)
             for b in COMBINABLE[i + 1:]]
    for p_number, (a, b) in enumerate(pairs):
        for length in combine_lengths:
            for s in range(combine_seeds):
                rng = numpy.random.default_rng([seed, 2, p_number, length,
                                                s])
                ts = patterns.combined(a, b, length, rng)
                cases.append(Case('otava', 'combine',
                                  f'combine({a}+{b})/L{length}/s{s}',
                                  [float(v) for v in ts.data],
                                  truths_of(ts),
                                  {'length': length, 'pair': f'{a}+{b}'}))
    return cases


def run_otava_corpus(cases, detectors):
    tallies = {}      # (family, detector) -> Tally
    kinds = {}        # (family, kind) -> [tp, fp, fn]
    per_pair = {}
    for case in cases:
        for det in detectors:
            found = det.detect(case.values)
            tp, fp, fn, wrong, near = score_shifts(case, det.shifts(found))
            tallies.setdefault((case.family, det.name), Tally()).add(
                tp, fp, fn, wrong, near, case.meta['length'])
            if 'pair' in case.meta:
                per_pair.setdefault((case.meta['pair'], det.name),
                                    Tally()).add(tp, fp, fn, wrong, near)
            if det.name == 'suite':
                for kind, types in (('noise', NOISE_TYPES),
                                    ('outlier', OUTLIER_TYPES)):
                    row = kinds.setdefault((case.family, kind), [0, 0, 0])
                    for k, v in enumerate(score_kind(case, found, kind,
                                                     types)):
                        row[k] += v
                row = kinds.setdefault((case.family, 'silent'), [0, 0, 0])
                row[1] += sum(1 for d in found if d.kind == 'silent')
    return tallies, kinds, per_pair


# -- corpus 2: nightly histories ------------------------------------------

def nightly_cases(trials, histories, seed):
    '''(changed, unchanged): changed histories with RUNS_BEFORE (and
    LONG_BEFORE) runs, then MAX_AFTER changed runs; unchanged ones.'''
    changed, unchanged = [], []
    for k, spread in enumerate(SPREADS):
        cells = [(RUNS_BEFORE, sign * effect) for effect in EFFECTS
                 for sign in (-1, 1)]
        cells.append((LONG_BEFORE[0], -LONG_BEFORE[1]))
        for c, (before, effect) in enumerate(cells):
            rng = numpy.random.default_rng([seed, 3, k, c])
            for t in range(trials):
                values = LEVEL * (1 + spread * rng.standard_normal(
                    before + MAX_AFTER))
                values[before:] *= 1 + effect
                changed.append(Case(
                    'nightly', f'nightly {round(100 * abs(effect))} %',
                    f'{100 * spread:.1f}%/{100 * effect:+.0f}%/N{before}/'
                    f't{t}', [float(v) for v in values],
                    [(before, 'step', effect < 0)],
                    {'spread': spread, 'effect': effect, 'before': before,
                     'f1_after': int(rng.integers(1, MAX_AFTER + 1))}))
        rng = numpy.random.default_rng([seed, 4, k])
        for h in range(histories):
            length = int(rng.integers(UNCHANGED_LENGTHS[0],
                                      UNCHANGED_LENGTHS[1] + 1))
            values = LEVEL * (1 + spread * rng.standard_normal(length))
            unchanged.append(Case(
                'nightly', 'nightly unchanged',
                f'{100 * spread:.1f}%/unchanged/h{h}',
                [float(v) for v in values], [], {'spread': spread}))
    return changed, unchanged


def run_nightly(changed, unchanged, detectors):
    fa = {}          # (detector, spread) -> counts
    tallies = {}     # (family, detector) -> Tally
    kinds = {}       # kind -> [tp, fp, fn] (suite, unchanged histories)
    for case in unchanged:
        spread = case.meta['spread']
        for det in detectors:
            row = fa.setdefault((det.name, spread), {
                'histories': 0, 'nights': 0, 'slowdown_alarms': 0,
                'false_changes': 0, 'histories_alarmed': 0})
            row['histories'] += 1
            alarmed = False
            for n in range(MIN_NIGHT, len(case.values) + 1):
                found = det.detect(case.values[:n])
                shifts = det.shifts(found)
                row['nights'] += 1
                slow = any(d.worse for d in shifts)
                row['slowdown_alarms'] += slow
                row['false_changes'] += bool(shifts)
                alarmed = alarmed or slow
                if n == len(case.values):
                    tallies.setdefault(('nightly unchanged', det.name),
                                       Tally()).add(0, len(shifts), 0)
                    if det.name == 'suite':
                        for kind in ('noise', 'outlier', 'silent'):
                            kinds.setdefault(kind, [0, 0, 0])[1] += sum(
                                1 for d in found if d.kind == kind)
            row['histories_alarmed'] += alarmed
    cells = {}       # (detector, spread, effect, before) -> lists
    for case in changed:
        spread, effect = case.meta['spread'], case.meta['effect']
        before = case.meta['before']
        for det in detectors:
            cell = cells.setdefault((det.name, spread, effect, before), {
                'series': 0, 'detected': [0] * (MAX_AFTER + 1),
                'exact': [0] * (MAX_AFTER + 1),
                'faster': [0] * (MAX_AFTER + 1),
                'slower_alarm_nights': 0, 'wrong_way_nights': 0,
                'delays': [], 'first_exact': 0})
            cell['series'] += 1
            first = None
            for m in range(1, MAX_AFTER + 1):
                found = det.detect(case.values[:before + m])
                shifts = det.shifts(found)
                if m == case.meta['f1_after']:
                    tp, fp, fn, wrong, near = score_shifts(case, shifts)
                    tallies.setdefault((case.family, det.name),
                                       Tally()).add(tp, fp, fn, wrong, near)
                near = [d for d in shifts
                        if abs(d.index - before) <= TOLERANCE]
                slower = sorted((abs(d.index - before), d.index)
                                for d in near if d.worse)
                faster = [d for d in near if d.worse is False]
                if effect < 0:
                    if slower:
                        cell['detected'][m] += 1
                        cell['exact'][m] += slower[0][1] == before
                        if first is None:
                            first = m
                            cell['first_exact'] += slower[0][1] == before
                    cell['wrong_way_nights'] += bool(faster) and not slower
                else:
                    cell['faster'][m] += bool(faster)
                    cell['slower_alarm_nights'] += any(d.worse
                                                       for d in shifts)
            if first is not None:
                cell['delays'].append(first)
    return fa, tallies, kinds, cells


def alarm_rate(fa_row):
    return (fa_row['slowdown_alarms'] + 0.5) / fa_row['nights']


# -- output ---------------------------------------------------------------

def fmt(value, digits=2):
    if value is None:
        return '-'
    if isinstance(value, float):
        return f'{value:.{digits}f}'
    return str(value)


def pct(k, n):
    return '-' if not n else f'{100 * k / n:.0f} %'


def markdown(result, names):
    lines = []
    add = lines.append
    s = result['settings']
    add(f'Detector scorecard (seed {s["seed"]}, '
        f'{"quick" if s["quick"] else "default"} mode; suite: '
        f'{result["suite_api"]}; Otava: window {s["otava"]["window_len"]}, '
        f'p {s["otava"]["max_pvalue"]}, min_magnitude '
        f'{s["otava"]["min_magnitude"]})')
    add('')
    if s['corpus'] != 'nightly':
        add(f'otava-test-data 0.1.9: level {LEVEL:g}, noise sigma '
            f'{s["sigma"]:g}; mean shifts of '
            f'{"/".join(map(str, SHIFT_SIGMAS))} sigma, up or down; '
            f'outliers {OUTLIER_SIGMAS} sigma; variance x'
            f'{"/".join(map(str, VARIANCE_RATIOS))}; lengths '
            f'{"/".join(map(str, LENGTHS))}, {s["seeds"]} seed(s) each '
            f'(combine: lengths '
            f'{"/".join(map(str, s["combine_lengths"]))}, '
            f'{s["combine_seeds"]} seed(s))')
    if s['corpus'] != 'otava':
        add(f'Nightly: Gaussian noise at spreads '
            f'{", ".join(f"{100 * x:g} %" for x in SPREADS)}; '
            f'{s["trials"]} changed histories per cell, '
            f'{s["histories"]} unchanged per spread')
    add('')
    shifts = result.get('mean_shifts')
    if shifts:
        add('Mean shifts found within 2 runs (P precision, R recall; '
            '"false" = detections matched to no mean shift, with the '
            'other truths they sat near)')
        add('')
        head = '| family | series | shifts |'
        rule = '| --- | --- | --- |'
        for n in names:
            head += f' {n} P | {n} R | {n} F1 | {n} false |'
            rule += ' --- | --- | --- | --- |'
        add(head)
        add(rule)
        for family, row in shifts.items():
            first = row[names[0]]
            line = f'| {family} | {first["series"]} | {first["truths"]} |'
            for n in names:
                r = row[n]
                near = ', '.join(f'{v} {k}' for k, v in
                                 r['false_near'].items())
                false = f'{r["fp"]}' + (f' ({near})' if near else '')
                if r['wrong_way']:
                    false += f'; {r["wrong_way"]} wrong way'
                line += (f' {fmt(r["precision"])} | {fmt(r["recall"])} | '
                         f'{fmt(r["f1"])} | {false} |')
            add(line)
        add('')
    kinds = result.get('kinds')
    if kinds and 'suite' in names:
        add("The suite's other kinds against the generator's labels "
            "(every event of the kind; Otava has no kinds)")
        add('')
        add('| kind | truths | found | false | precision | recall |')
        add('| --- | --- | --- | --- | --- | --- |')
        for kind, row in kinds.items():
            add(f'| {kind} | {row["truths"]} | {row["tp"]} | {row["fp"]} | '
                f'{fmt(row["precision"])} | {fmt(row["recall"])} |')
        add('')
    fa = result.get('false_alarms')
    if fa:
        add('False alarms per 1,000 case-nights on unchanged histories '
            '(20-50 runs; every night from the 10th judged afresh)')
        add('')
        head = '| spread | nights |'
        rule = '| --- | --- |'
        for n in names:
            head += (f' {n} slowdown alarms | {n} any change | '
                     f'{n} histories alarmed |')
            rule += ' --- | --- | --- |'
        add(head)
        add(rule)
        for spread, row in fa.items():
            first = row[names[0]]
            line = f'| {spread} | {first["nights"]} |'
            for n in names:
                r = row[n]
                line += (f' {r["slowdown_per_1000"]:.2f} '
                         f'({r["slowdown_alarms"]}) | '
                         f'{r["false_change_per_1000"]:.2f} '
                         f'({r["false_changes"]}) | '
                         f'{r["histories_alarmed"]} of {r["histories"]} |')
            add(line)
        add('')
        add('Alarm rates used for the limits below ((alarms + 0.5) / '
            'nights): ' + '; '.join(
                f'{spread} ' + ', '.join(
                    f'{n} {100 * row[n]["alpha_used_for_limit"]:.3f} %'
                    for n in names)
                for spread, row in fa.items() if spread != 'all'))
        add('')
    rates = result.get('detection')
    if rates:
        add('Slowdowns detected (within 2 runs, as slower) on the night '
            'with M runs after the change, and by then (an alarm on one of '
            'the nights 1..M: a nightly report\'s "within M runs"), '
            'beside the limit: the one-sided z-test of the M runs after '
            'against the N before with the spread known, at the '
            'detector\'s own measured alarm rate and at 0.1 %; and the '
            't limit: the one-sided t-test at 0.1 % with the spread '
            'estimated from the N runs before, the change\'s run known '
            '(what a detector that knows only the history can reach)')
        add('')
        head = '| spread | slowdown | N | M |'
        rule = '| --- | --- | --- | --- |'
        for n in names:
            head += f' {n} on night M | {n} by night M | limit at {n} alarm rate |'
            rule += ' --- | --- | --- |'
        head += ' limit at 0.1 % | t limit at 0.1 % |'
        rule += ' --- | --- |'
        add(head)
        add(rule)
        for row in rates:
            if row['effect'] > 0 or row['after'] not in TABLE_AFTER:
                continue
            line = (f'| {row["spread"]} | {row["effect_pct"]} | '
                    f'{row["before"]} | {row["after"]} |')
            for n in names:
                r = row[n]
                line += (f' {r["detected"]} of {r["series"]} '
                         f'({pct(r["detected"], r["series"])}) | '
                         f'{pct(r["found_by"], r["series"])} | '
                         f'{100 * r["limit_own"]:.0f} % |')
            line += (f' {100 * row["limit_0.1%"]:.0f} % | '
                     f'{100 * row["t_limit_0.1%"]:.0f} % |')
            add(line)
        add('')
        add('Delay and dating of the slowdowns (over 1..10 runs after), '
            'and the speed-ups')
        add('')
        head = '| spread | change | N |'
        rule = '| --- | --- | --- |'
        for n in names:
            head += (f' {n} found by 10 | {n} median delay | '
                     f'{n} dated exactly | {n} wrong way |')
            rule += ' --- | --- | --- | --- |'
        add(head)
        add(rule)
        for row in result['delays']:
            line = (f'| {row["spread"]} | {row["effect_pct"]} | '
                    f'{row["before"]} |')
            for n in names:
                r = row[n]
                if row['effect'] < 0:
                    line += (f' {pct(r["found"], r["series"])} | '
                             f'{fmt(r["median_delay"], 1)} | '
                             f'{pct(r["first_exact"], r["found"])} | '
                             f'{r["wrong_way_nights"]} nights |')
                else:
                    line += (f' faster {pct(r["faster_10"], r["series"])}'
                             f' | - | - | {r["slower_alarm_nights"]} '
                             f'alarm nights |')
            add(line)
        add('')
    add('Seconds in each detector: ' + ', '.join(
        f'{n} {result["seconds"][n]:.1f} s ({result["calls"][n]} calls)'
        for n in names) + f'; whole run {result["seconds"]["total"]:.1f} s')
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='fewer seeds and trials (about a minute)')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--only', choices=('otava', 'suite'))
    parser.add_argument('--corpus', choices=('otava', 'nightly', 'all'),
                        default='all')
    parser.add_argument('--markdown', metavar='FILE')
    parser.add_argument('--json', metavar='FILE')
    parser.add_argument('--otava-dir', default=os.path.join('var', 'otava'),
                        help='where Otava and otava-test-data are '
                             'installed (pip --target)')
    parser.add_argument('--sigma', type=float, default=2.0,
                        help='noise sigma of the generated patterns, at '
                             'a level of 100')
    parser.add_argument('--seeds', type=int,
                        help='seeds per pattern and length')
    parser.add_argument('--trials', type=int,
                        help='changed nightly histories per cell')
    parser.add_argument('--histories', type=int,
                        help='unchanged nightly histories per spread')
    parser.add_argument('--otava-window', type=int, default=30)
    parser.add_argument('--otava-pvalue', type=float, default=0.001)
    parser.add_argument('--otava-min-magnitude', type=float, default=0.05)
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else DEFAULT)
    for key in ('seeds', 'trials', 'histories'):
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    otava_dir = os.path.abspath(args.otava_dir)
    wanted = ('suite', 'otava') if args.only is None else (args.only,)
    need_otava = 'otava' in wanted or args.corpus != 'nightly'
    loaded = load_otava(otava_dir) if need_otava else None
    if need_otava and loaded is None:
        print(install_line(otava_dir))
        return 2
    started = time.perf_counter()
    detectors = []
    if 'suite' in wanted:
        detectors.append(Suite())
    if 'otava' in wanted:
        detectors.append(Otava(loaded[0], args.otava_window,
                               args.otava_pvalue, args.otava_min_magnitude))
    names = [d.name for d in detectors]
    result = {'settings': {
        'seed': args.seed, 'quick': args.quick, 'corpus': args.corpus,
        'detectors': names, 'tolerance_runs': TOLERANCE,
        'sigma': args.sigma, 'level': LEVEL, 'lengths': LENGTHS,
        'shift_sigmas': SHIFT_SIGMAS, 'outlier_sigmas': OUTLIER_SIGMAS,
        'variance_ratios': VARIANCE_RATIOS, 'band_sigmas': BAND_SIGMAS,
        'phase_sigmas': PHASE_SIGMAS, 'spreads': SPREADS,
        'effects': EFFECTS, 'runs_before': RUNS_BEFORE,
        'long_before': LONG_BEFORE, 'max_after': MAX_AFTER,
        'first_night': MIN_NIGHT, 'unchanged_lengths': UNCHANGED_LENGTHS,
        'otava': {'window_len': args.otava_window,
                  'max_pvalue': args.otava_pvalue,
                  'min_magnitude': args.otava_min_magnitude},
        'suite_settings': {k: getattr(changes, k) for k in (
            'ALPHA', 'WEAK_ALPHA', 'TAIL_ALPHA', 'TAIL_MAX_AFTER',
            'TAIL_WINDOW', 'MIN_CHANGE', 'MIN_SEGMENT', 'WINDOW',
            'MAX_HALVINGS', 'MAX_HISTORY')},
        **{k: list(v) if isinstance(v, tuple) else v
           for k, v in sizes.items()}},
        'suite_api': (detectors[0].api if names[0] == 'suite' else
                      'not run')}
    shifts = {}
    kinds_out = {}

    def add_family(family, tallies):
        shifts[family] = {n: tallies.get((family, n), Tally()).as_dict()
                          for n in names}

    def pooled(label, families, tallies):
        total = {n: Tally() for n in names}
        for (family, n), tally in tallies.items():
            if family in families:
                total[n].merge(tally)
        shifts[label] = {n: total[n].as_dict() for n in names}

    if args.corpus in ('otava', 'all'):
        cases = otava_corpus(loaded[1], args.sigma, sizes['seeds'],
                             sizes['combine_seeds'],
                             sizes['combine_lengths'], args.seed)
        print(f'otava-test-data corpus: {len(cases)} series ...',
              file=sys.stderr, flush=True)
        tallies, kinds, per_pair = run_otava_corpus(cases, detectors)
        for family in (*PATTERNS, 'combine'):
            add_family(family, tallies)
        pooled('otava-test-data, all', {*PATTERNS, 'combine'}, tallies)
        result['combine_pairs'] = {
            pair: {n: per_pair[(pair, n)].as_dict() for n in names}
            for pair in sorted({p for p, _ in per_pair})}
        if 'suite' in names:
            for kind, types in (('noise', NOISE_TYPES),
                                ('outlier', OUTLIER_TYPES)):
                tp = sum(v[0] for (f, k), v in kinds.items() if k == kind)
                fp = sum(v[1] for (f, k), v in kinds.items() if k == kind)
                fn = sum(v[2] for (f, k), v in kinds.items() if k == kind)
                p, r, _ = prf(tp, fp, fn)
                kinds_out[f'{kind} (vs {"/".join(sorted(types))}), '
                          'otava-test-data'] = {
                    'truths': tp + fn, 'tp': tp, 'fp': fp, 'fn': fn,
                    'precision': p, 'recall': r,
                    'by_family': {f: dict(zip(('tp', 'fp', 'fn'), v))
                                  for (f, k), v in sorted(kinds.items())
                                  if k == kind and any(v)}}
            silent = sum(v[1] for (f, k), v in kinds.items()
                         if k == 'silent')
            kinds_out['silent, otava-test-data (no times: none true)'] = {
                'truths': 0, 'tp': 0, 'fp': silent, 'fn': 0,
                'precision': None, 'recall': None}
        print(f'  done at {time.perf_counter() - started:.0f} s',
              file=sys.stderr, flush=True)
    if args.corpus in ('nightly', 'all'):
        changed, unchanged = nightly_cases(sizes['trials'],
                                           sizes['histories'], args.seed)
        print(f'nightly corpus: {len(changed)} changed histories x '
              f'{MAX_AFTER} nights, {len(unchanged)} unchanged ...',
              file=sys.stderr, flush=True)
        fa, tallies, kinds, cells = run_nightly(changed, unchanged,
                                                detectors)
        families = sorted({c.family for c in changed},
                          key=lambda f: int(f.split()[1]))
        for family in (*families, 'nightly unchanged'):
            add_family(family, tallies)
        pooled('nightly, all', {*families, 'nightly unchanged'}, tallies)
        if 'suite' in names:
            for kind, row in kinds.items():
                kinds_out[f'{kind}, nightly unchanged histories (none '
                          'true)'] = {'truths': 0, 'tp': 0, 'fp': row[1],
                                      'fn': 0, 'precision': None,
                                      'recall': None}
        result['false_alarms'] = {}
        for spread in SPREADS:
            row = {}
            for n in names:
                r = dict(fa[(n, spread)])
                r['slowdown_per_1000'] = (1000 * r['slowdown_alarms'] /
                                          r['nights'])
                r['false_change_per_1000'] = (1000 * r['false_changes'] /
                                              r['nights'])
                r['alpha_used_for_limit'] = alarm_rate(r)
                row[n] = r
            result['false_alarms'][f'{100 * spread:.1f} %'] = row
        all_row = {}
        for n in names:
            r = {k: sum(fa[(n, s)][k] for s in SPREADS)
                 for k in fa[(n, SPREADS[0])]}
            r['slowdown_per_1000'] = 1000 * r['slowdown_alarms'] / r['nights']
            r['false_change_per_1000'] = (1000 * r['false_changes'] /
                                          r['nights'])
            all_row[n] = r
        result['false_alarms']['all'] = all_row
        detection, delays = [], []
        keys = sorted({k[1:] for k in cells},
                      key=lambda k: (-k[0], k[1] > 0, abs(k[1]), k[2]))
        for spread, effect, before in keys:
            base = {'spread': f'{100 * spread:.1f} %',
                    'effect': effect, 'effect_pct':
                    f'{100 * effect:+.0f} %', 'before': before}
            for m in range(1, MAX_AFTER + 1):
                row = dict(base, after=m)
                row['t_limit_0.1%'] = t_power(abs(
                    math.log(1 + effect)), spread, m, before, ALPHA_LIMIT)
                row['limit_0.1%'] = z_power(abs(effect), spread, m, before,
                                            ALPHA_LIMIT)
                for n in names:
                    c = cells[(n, spread, effect, before)]
                    alpha = alarm_rate(fa[(n, spread)])
                    row[n] = {'series': c['series'],
                              'detected': c['detected'][m],
                              # Alarmed on one of the nights 1..m (a
                              # nightly report's "within m runs").
                              'found_by': sum(d <= m for d in c['delays']),
                              'dated_exactly': c['exact'][m],
                              'seen_as_faster': c['faster'][m],
                              'alpha': alpha,
                              'limit_own': z_power(abs(effect), spread, m,
                                                   before, alpha)}
                detection.append(row)
            row = dict(base)
            for n in names:
                c = cells[(n, spread, effect, before)]
                row[n] = {'series': c['series'], 'found': len(c['delays']),
                          'median_delay': (float(statistics.median(
                              c['delays'])) if c['delays'] else None),
                          'delays': c['delays'],
                          'first_exact': c['first_exact'],
                          'wrong_way_nights': c['wrong_way_nights'],
                          'faster_10': c['faster'][MAX_AFTER],
                          'slower_alarm_nights': c['slower_alarm_nights']}
            delays.append(row)
        result['detection'] = detection
        result['delays'] = delays
        print(f'  done at {time.perf_counter() - started:.0f} s',
              file=sys.stderr, flush=True)
    if len(shifts) > 1 and args.corpus == 'all':
        total = {n: Tally() for n in names}
        for label in ('otava-test-data, all', 'nightly, all'):
            for n in names:
                t = Tally()
                d = shifts[label][n]
                t.series, t.truths = d['series'], d['truths']
                t.tp, t.fp, t.fn = d['tp'], d['fp'], d['fn']
                t.wrong_way = d['wrong_way']
                t.false_near = dict(d['false_near'])
                total[n].merge(t)
        shifts['all'] = {n: total[n].as_dict() for n in names}
    result['mean_shifts'] = shifts
    result['kinds'] = kinds_out
    result['seconds'] = {d.name: d.seconds for d in detectors}
    result['seconds']['total'] = time.perf_counter() - started
    result['calls'] = {d.name: d.calls for d in detectors}
    text = markdown(result, names)
    print(text)
    if args.markdown:
        with open(args.markdown, 'w') as fp:
            fp.write(text)
    if args.json:
        with open(args.json, 'w') as fp:
            json.dump(result, fp, indent=1, default=float)
    return 0


if __name__ == '__main__':
    sys.exit(main())
