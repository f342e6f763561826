"""The change detector: what happened to a series of runs, where, and how
sure. One detector for ``hpcml report``, ``hpcml references`` (references
are derived from the runs after the last shift) and ``hpcml changes``
(any series from a CSV file). Its score beside Apache Otava is in
``bench/README.md`` ("How good is the change detection").

It reports **events** of four kinds (:class:`Change`, ``kind``):

- ``shift``: the level moved. Flagged (an alarm where it is a slowdown)
  when it is significant (p below :data:`ALPHA`) and at least
  :data:`MIN_CHANGE` in size; its direction is the metric's own (for step
  time or energy per sample a rise is a slowdown); a speed-up is reported
  as one, never as an alarm;
- ``noise``: the spread changed, the level did not; ``outlier``: one odd
  run; ``silent``: the case stopped running (:mod:`.change_kinds`).

How shifts are found, on the logarithm of the values (so that a change is
relative, as a slowdown is):

1. the outliers are set aside (:func:`.change_kinds.outliers`), and the
   values beyond 3 robust standard deviations of the median clipped to
   that bound (:func:`.change_nulls.winsorized`: heavy tails);
2. **the history**: binary segmentation by the largest pooled two-sample
   t over the splits of a segment (:func:`.change_nulls.split_t`, the
   maximum-likelihood split for a step in the mean of normal noise), each
   split's p-value the share of series of normal noise of that length
   whose largest t is as large (simulated: corrected for the search over
   splits). Candidates are kept at :data:`WEAK_ALPHA`, from the whole
   history, from the halves of a segment with none, and from windows of
   :data:`SEARCH_WINDOW` runs every :data:`SEARCH_STEP` (a regression and its fix split no segment
   in two), then merged: the weakest change point whose two neighbouring
   segments differ at p of :data:`ALPHA` or more is dropped and its
   neighbours judged again, until none is left (the split-and-merge of
   Apache Otava: Fleming et al., "Hunter: Using Change Point Detection to
   Hunt for Performance Regressions", ICPE 2023);
3. **the newest runs**: a change with only a few runs after it is what
   a nightly report must see first, and the history's test, searching
   every split, needs more. The last m runs of the last segment against
   the runs before them, for m = 2 .. :data:`TAIL_MAX_AFTER`, by a t over
   the spread of the runs before (:func:`.change_nulls.tail_t`), one side
   at a time; the largest, at p below :data:`TAIL_ALPHA` (corrected for the
   m searched), is a shift at the m that gives it.

The effect is the ratio of the medians of the runs on each side (up to
``window`` runs each, within the neighbouring segments) with a percentile
bootstrap 95 % interval. The power this has, against the limit of the
statistics, was measured (``bench/detector_scorecard.py``).
"""
import dataclasses
import math
import random
import statistics
import time

import numpy

from hpctestlib_ml.changes import kinds as change_kinds
from hpctestlib_ml.changes import nulls as change_nulls

#: Significance of a shift in the history (after the merge).
ALPHA = 0.001
#: Significance of a candidate shift before the merge.
WEAK_ALPHA = 0.01
#: Significance of a shift in the newest runs, each direction.
TAIL_ALPHA = 0.001
#: Most runs after a change that the newest-runs test searches. Each m
#: searched raises the bar for all: on the scorecard's histories at a
#: spread of 4.7 %, a 10 % slowdown was called within 3 runs in 29 % of
#: 20-run histories with m up to 10, 40 % with 5, 47 % with 4 (within 5
#: runs: 61, 75, 72 %) at the same false-alarm rate. Older changes are
#: the history's search's (three runs a side).
TAIL_MAX_AFTER = 5
#: Most runs of the last segment that the newest-runs test takes.
TAIL_WINDOW = 50
#: Practical threshold: smaller shifts are not flagged, however certain.
MIN_CHANGE = 0.05
#: Fewest runs on either side of a change point in the history.
MIN_SEGMENT = 3
#: Runs on each side of a change whose medians give its effect.
WINDOW = 10
BOOTSTRAP = 2000
#: Runs of each window the history's search also looks in.
SEARCH_WINDOW = 30
#: Runs between the starts of those windows.
SEARCH_STEP = 5
#: Halvings of a segment that shows no change as a whole.
MAX_HALVINGS = 2
#: Runs a change point may move when it is dated (:func:`_refine`).
REFINE = 2
#: Runs of a case searched for changes (its latest).
MAX_HISTORY = 100

#: The kinds of event, in the order a report lists them.
KINDS = ('shift', 'noise', 'outlier', 'silent')


@dataclasses.dataclass
class Change:
    '''One event in a series.'''
    index: int              # first run after the change (the odd run;
    #                         for ``silent``, the number of runs)
    when: float             # its time (Unix seconds; the last run's for
    #                         ``silent``)
    before: int             # runs compared on each side
    after: int
    effect: float           # median(after) / median(before) - 1; for
    #                         ``noise`` the ratio of spreads - 1
    low: float              # bootstrap 95 % interval of the effect
    high: float
    p_value: float          # the test's p (None for outliers and silence)
    change_point_p: float   # the same (kept for the report's callers)
    flagged: bool           # a shift both significant and large enough
    worse: bool             # in the metric's bad direction (None: no
    #                         direction, as for silence)
    kind: str = 'shift'
    detail: str = ''        # what a person reads: spreads, gap

    def describe(self):
        if self.kind != 'shift':
            return f'{self.kind}: {self.detail}'
        sign = 'slower' if self.worse else 'faster'
        return (f'{100 * self.effect:+.1f}% [{100 * self.low:+.1f}, '
                f'{100 * self.high:+.1f}] ({sign}), p={self.p_value:.2g}')


def bootstrap_ratio(before, after, rounds=BOOTSTRAP, seed=0):
    '''Percentile 95 % interval of median(after) / median(before) - 1.'''
    rng = random.Random(seed)
    ratios = []
    for _ in range(rounds):
        b = statistics.median(rng.choices(before, k=len(before)))
        a = statistics.median(rng.choices(after, k=len(after)))
        if b:
            ratios.append(a / b - 1)
    ratios.sort()
    if not ratios:
        return math.nan, math.nan
    return (ratios[int(0.025 * (len(ratios) - 1))],
            ratios[int(0.975 * (len(ratios) - 1))])


def _scale(values):
    '''The values the tests see: their logarithm where all are positive
    (a change is then relative), else the values.'''
    x = numpy.asarray(values, dtype=float)
    return numpy.log(x) if len(x) and (x > 0).all() else x


def _best_split(z, min_segment):
    '''(split, p) of the largest pooled t over the splits of *z*.'''
    if len(z) < 2 * min_segment:
        return None, 1.0
    k, t = change_nulls.split_t(z, min_segment)
    best = int(numpy.argmax(numpy.abs(t)))
    return int(k[best]), change_nulls.p_value(abs(float(t[best])), 'split',
                                              len(z), min_segment)


def _candidates(z, min_segment):
    '''Change points of *z* at :data:`WEAK_ALPHA`, by binary segmentation
    with halvings (see the module's text).'''
    found = []

    def search(lo, hi, halvings=0):
        if hi - lo < 2 * min_segment:
            return
        k, p = _best_split(z[lo:hi], min_segment)
        if k is None or p >= WEAK_ALPHA:
            if hi - lo >= 4 * min_segment and halvings < MAX_HALVINGS:
                mid = (lo + hi) // 2
                search(lo, mid, halvings + 1)
                search(mid, hi, halvings + 1)
            return
        found.append(lo + k)
        search(lo, lo + k, halvings)
        search(lo + k, hi, halvings)

    search(0, len(z))
    # And within windows of SEARCH_WINDOW runs, SEARCH_STEP apart (as
    # Apache Otava's split step, more densely): a regression and its fix
    # inside a long history move the mean of no half of it enough to be
    # seen, but each is the one step of some window. The merge judges
    # every candidate on its neighbouring segments whatever found it.
    for lo in range(0, max(1, len(z) - SEARCH_STEP), SEARCH_STEP):
        search(lo, min(len(z), lo + SEARCH_WINDOW), MAX_HALVINGS)
    return sorted(set(found))


def _merge(z, points, min_segment, alpha):
    '''[(point, p)]: *points* less the weakest, one at a time, while the
    weakest's two neighbouring segments differ at p >= *alpha*.'''
    points = list(points)
    while points:
        bounds = [0] + points + [len(z)]
        judged = []
        for i, k in enumerate(points):
            lo, hi = bounds[i], bounds[i + 2]
            if min(k - lo, hi - k) < min_segment:
                # Candidates from overlapping searches, too close to
                # stand together: the weaker goes first.
                judged.append(1.0)
                continue
            _, t = change_nulls.split_t(z[lo:hi], 1)
            observed = abs(float(t[k - lo - 1]))
            judged.append(change_nulls.p_value(observed, 'split', hi - lo,
                                               min_segment))
        weakest = int(numpy.argmax(judged))
        if judged[weakest] < alpha:
            return list(zip(points, judged))
        del points[weakest]
    return []


def _tail_shift(z, start):
    '''(point, p) of a shift in the newest runs of *z* after *start* (the
    last change point), or None (see the module's text).'''
    lo = max(start, len(z) - TAIL_WINDOW)
    tail = z[lo:]
    if len(tail) < change_nulls.TAIL_MIN_BEFORE + 2:
        return None
    m, t = change_nulls.tail_t(tail, TAIL_MAX_AFTER)
    best = None
    for side in (1, -1):
        p = change_nulls.p_value(float(numpy.max(side * t)), 'tail',
                                 len(tail), TAIL_MAX_AFTER)
        if p < TAIL_ALPHA and (best is None or p < best[1]):
            best = (side, p)
    if best is None:
        return None
    # Whether is the test's; where is the split that fits two levels best
    # (the largest pooled t in the detected direction) among the newest
    # runs: the test's own m leans long, taking a run from before the
    # change into the mean after it.
    k, t = change_nulls.split_t(tail, 1)
    near = k >= len(tail) - TAIL_MAX_AFTER
    side, p = best
    split = int(k[near][int(numpy.argmax(side * t[near]))])
    return lo + split, p


def shift_points(values, alpha=ALPHA, min_segment=MIN_SEGMENT,
                 skip=()):
    '''[(index, p)] of every shift in *values* (indices into *values*),
    the runs in *skip* (outliers) left out of the search.'''
    keep = [i for i in range(len(values)) if i not in set(skip)]
    if not keep:
        return []
    z = change_nulls.winsorized(_scale([values[i] for i in keep]))
    merged = _merge(z, _candidates(z, min_segment), min_segment, alpha)
    tail = _tail_shift(z, merged[-1][0] if merged else 0)
    if tail:
        merged.append(tail)
    return [(keep[k], p) for k, p in _refine(z, merged)]


def _refine(z, points):
    '''*points* each moved, by up to :data:`REFINE` runs, to the split of
    its two neighbouring segments that fits two levels best, down to one
    run a side: the history's search keeps :data:`MIN_SEGMENT` runs a
    side, so that a change two runs before the newest would be dated a
    run early.'''
    bounds = [0] + [k for k, _ in points] + [len(z)]
    out = []
    for i, (k, p) in enumerate(points):
        lo, hi = bounds[i], bounds[i + 2]
        splits, t = change_nulls.split_t(z[lo:hi], 1)
        near = numpy.abs(splits + lo - k) <= REFINE
        moved = int(splits[near][int(numpy.argmax(numpy.abs(t[near])))])
        out.append((lo + moved, p))
        bounds[i + 1] = lo + moved
    return out


def change_points(values, alpha=ALPHA, min_segment=MIN_SEGMENT):
    '''[(index, p)] of the shifts in *values*, outliers left out.'''
    return shift_points(values, alpha, min_segment,
                        change_kinds.outliers(_scale(values)))


def _shift_events(values, times, points, skip, higher_is_better, alpha,
                  min_change, window):
    skip = set(skip)
    bounds = [0] + [k for k, _ in points] + [len(values)]
    out = []
    for i, (k, p) in enumerate(points):
        before = [values[j] for j in range(bounds[i], k) if j not in skip]
        after = [values[j] for j in range(k, bounds[i + 2])
                 if j not in skip]
        before, after = before[-window:], after[:window]
        center = statistics.median(before)
        effect = statistics.median(after) / center - 1 if center else math.nan
        low, high = bootstrap_ratio(before, after)
        worse = effect < 0 if higher_is_better else effect > 0
        out.append(Change(k, times[k], len(before), len(after), effect, low,
                          high, p, p, p < alpha and abs(effect) >= min_change,
                          worse))
    return out


def _noise_events(values, times, points, odd):
    '''(changes of spread within each stretch of one level, its odd runs
    included: they are part of the spread, and one odd run cannot make
    the spread test significant; *odd* less the runs that are within the
    wider of the two spreads of their stretch).'''
    bounds = [0] + [k for k, _ in points] + [len(values)]
    out, odd = [], set(odd)
    for lo, hi in zip(bounds, bounds[1:]):
        y = _scale(values[lo:hi])
        found = change_kinds.spread_change(y)
        if not found:
            continue
        k, p, before, after = found
        index = lo + k
        out.append(Change(
            index, times[index], k, hi - lo - k, after / before - 1,
            math.nan, math.nan, p, p, False, after > before, 'noise',
            f'spread {100 * before:.1f}% -> {100 * after:.1f}% since '
            f'{_day(times[index])}'))
        # Where the spread rose, the first runs after it stood out of the
        # quiet before them; judged by the stretch's own spread, they
        # are noise, not outliers.
        wide, start, stop = ((after, k, hi - lo) if after > before
                             else (before, 0, k))
        center = numpy.median(y[start:stop])
        odd -= {lo + j for j in range(start, stop) if lo + j in odd and
                abs(y[j] - center) <= change_kinds.OUTLIER_Z * wide}
    return out, sorted(odd)


def _outlier_events(values, times, skip, higher_is_better):
    out = []
    for i in skip:
        around = [values[j] for j in range(max(0, i - 5), i + 6)
                  if j != i and j not in skip and j < len(values)]
        center = statistics.median(around) if around else math.nan
        effect = values[i] / center - 1 if center else math.nan
        worse = effect < 0 if higher_is_better else effect > 0
        newest = ' (the newest run: the next tells whether the level moved)' \
            if i == len(values) - 1 else ''
        out.append(Change(i, times[i], len(around), 1, effect, math.nan,
                          math.nan, None, None, False, worse, 'outlier',
                          f'one run {100 * effect:+.1f}% from its '
                          f'neighbours{newest}'))
    return out


def _day(seconds):
    return time.strftime('%Y-%m-%d', time.gmtime(seconds))


def events(values, times=None, higher_is_better=True, now=None,
           alpha=ALPHA, min_change=MIN_CHANGE, window=WINDOW,
           min_segment=MIN_SEGMENT, max_history=None):
    '''Every :class:`Change` in *values* (a case's passing runs in time
    order; *times* in Unix seconds, else their indices), in order of
    index: shifts (flagged where significant at *alpha* and at least
    *min_change*), changes of spread, outliers, and, given *now*, a
    silence. Given *max_history*, only the latest that many runs are
    searched (the report's :data:`MAX_HISTORY`).'''
    values = [float(v) for v in values]
    times = list(range(len(values))) if times is None else list(times)
    skipped = max(0, len(values) - (max_history or len(values)))
    values, times = values[skipped:], times[skipped:]
    if not values:
        return []
    odd = change_kinds.outliers(_scale(values))
    points = shift_points(values, alpha, min_segment, odd)
    noise, odd_left = _noise_events(values, times, points, odd)
    found = (_shift_events(values, times, points, odd, higher_is_better,
                           alpha, min_change, window) + noise +
             _outlier_events(values, times, odd_left, higher_is_better))
    quiet = change_kinds.silence(times, now)
    if quiet:
        usual, gap = quiet
        found.append(Change(
            len(values), times[-1], len(values), 0, math.nan, math.nan,
            math.nan, None, None, False, None, 'silent',
            f'no run for {gap / 86400:.1f} days, {gap / usual:.0f} of its '
            f'usual intervals (last {_day(times[-1])})'))
    for event in found:
        event.index += skipped
    return sorted(found, key=lambda e: (e.index, KINDS.index(e.kind)))


def latest_change(values, times, higher_is_better=True, alpha=ALPHA,
                  min_change=MIN_CHANGE, window=WINDOW,
                  min_segment=MIN_SEGMENT):
    '''The most recent shift (:class:`Change`) in a case's series, or
    None where it has none, in its latest :data:`MAX_HISTORY` runs.'''
    shifts = [e for e in events(values, times, higher_is_better,
                                alpha=alpha, min_change=min_change,
                                window=window, min_segment=min_segment,
                                max_history=MAX_HISTORY)
              if e.kind == 'shift']
    return shifts[-1] if shifts else None
