"""Change detection that knows the noise: did a case get slower (or
faster), since when, and by how much, judged against its own history.

A figure on a shared machine moves 10-30 % between identical runs (this
VM: bench/README.md, "Regression detection"), so a ratio of medians alone
is a false alarm every other night. A change is flagged only when it is
both:

1. **dated**: a change point in the whole history of the case: the split
   that maximises the standardised Mann-Whitney statistic (after A. N.
   Pettitt, "A non-parametric approach to the change-point problem",
   Applied Statistics 28:126, 1979), with a permutation p-value, applied
   by binary segmentation so a history with several shifts gets each of
   them. It uses ranks only: one odd run moves it no more than any other;
2. **significant**: the runs after the last change point against the runs
   before it (up to ``window`` on each side) by a two-sided Mann-Whitney U
   test, p below ``alpha``;
3. **large enough to matter**: the ratio of their medians departs from 1
   by at least ``min_change`` (a practical threshold; default 5 %).

The effect is the ratio of medians (after / before - 1) with a percentile
bootstrap 95 % interval. Direction is the metric's own: for step time or
energy per sample a rise is a slowdown.
"""
import dataclasses
import math
import random
import statistics

import numpy

#: Significance level of the change-point and the window tests.
ALPHA = 0.01
#: Practical threshold: smaller changes are not flagged, however certain.
MIN_CHANGE = 0.05
#: Fewest runs on either side of a change point.
MIN_SEGMENT = 3
#: Runs on each side of a change compared (the latest ones before it and
#: the first ones after it).
WINDOW = 10
BOOTSTRAP = 2000
#: Halvings of a segment that shows no change as a whole.
MAX_HALVINGS = 2
#: Runs of a case searched for changes (its latest).
MAX_HISTORY = 100
#: Random orders in the change point's permutation test.
PERMUTATIONS = 999


@dataclasses.dataclass
class Change:
    index: int              # first run after the change (in the series)
    when: float             # its time (Unix seconds)
    before: int             # runs compared on each side
    after: int
    effect: float           # median(after) / median(before) - 1
    low: float              # bootstrap 95 % interval of the effect
    high: float
    p_value: float          # Mann-Whitney U, two-sided
    change_point_p: float   # permutation p of the split, in its segment
    flagged: bool           # significant and larger than min_change
    worse: bool             # a slowdown in the metric's own direction

    def describe(self):
        sign = 'slower' if self.worse else 'faster'
        return (f'{100 * self.effect:+.1f}% [{100 * self.low:+.1f}, '
                f'{100 * self.high:+.1f}] ({sign}), p={self.p_value:.2g}')


def rankdata(values):
    '''Ranks 1..n, ties given their average rank (as scipy's default;
    scipy.stats itself takes seconds to import, the report's whole budget).'''
    x = numpy.asarray(values, dtype=float)
    order = numpy.argsort(x, kind='mergesort')
    ranks = numpy.empty(len(x))
    ranks[order] = numpy.arange(1, len(x) + 1)
    for value in numpy.unique(x):
        tied = x == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def mann_whitney_p(after, before, rounds=PERMUTATIONS * 10, seed=0):
    '''Two-sided p of the Mann-Whitney U test of *after* against
    *before*, by permutation (exact for small windows and ties, where the
    normal approximation is not).'''
    ranks = rankdata(list(after) + list(before))
    m, n = len(after), len(before)
    expected = m * (m + n + 1) / 2
    observed = abs(ranks[:m].sum() - expected)
    rng = numpy.random.default_rng(seed)
    shuffled = rng.permuted(numpy.tile(ranks, (rounds, 1)), axis=1)
    extreme = numpy.sum(numpy.abs(shuffled[:, :m].sum(axis=1) - expected)
                        >= observed - 1e-9)
    return float((extreme + 1) / (rounds + 1))


def _split_z(ranks, min_segment):
    '''(splits, |z| per split) for each row of *ranks* (n ranks a row).'''
    n = ranks.shape[-1]
    k = numpy.arange(min_segment, n - min_segment + 1)
    sums = numpy.cumsum(ranks, axis=-1)[..., k - 1]
    u = sums - k * (k + 1) / 2
    z = numpy.abs(u - k * (n - k) / 2) / numpy.sqrt(k * (n - k) * (n + 1)
                                                    / 12)
    return k, z


def split_statistic(values, min_segment=MIN_SEGMENT):
    '''(best split, its |z|): the standardised Mann-Whitney statistic of
    the first k values against the rest, maximised over the splits that
    leave *min_segment* values on each side (the Mann-Whitney change-point
    statistic of Pettitt, and of Ross, Tasoulis & Adams, "Nonparametric
    monitoring of data streams for changes in location and scale",
    Technometrics 53:379, 2011). Standardising gives a split near the end
    of the history the same chance as one in the middle, so a change a few
    runs ago is seen.'''
    if len(values) < 2 * min_segment:
        return None, 0.0
    k, z = _split_z(rankdata(values), min_segment)
    best = int(numpy.argmax(z))
    return int(k[best]), float(z[best])


def change_point_test(values, min_segment=MIN_SEGMENT,
                      rounds=PERMUTATIONS, seed=0):
    '''(split, p): the most likely change point of *values* and the
    permutation p-value of its statistic (the share of random orders of
    the same values whose best split is as extreme): exact for any noise
    distribution, and correct for having chosen the best of many splits.'''
    k, observed = split_statistic(values, min_segment)
    if k is None or observed == 0:
        return None, 1.0
    ranks = rankdata(values)
    rng = numpy.random.default_rng(seed)
    shuffled = rng.permuted(numpy.tile(ranks, (rounds, 1)), axis=1)
    _, z = _split_z(shuffled, min_segment)
    extreme = int(numpy.sum(z.max(axis=1) >= observed - 1e-12))
    return k, (extreme + 1) / (rounds + 1)


def locate(values, min_segment=MIN_SEGMENT):
    '''The split where the median changes: the one that minimises the
    summed absolute deviations from each side's median (the change-in-
    median cost). The standardised statistic tests better than it dates:
    it favours balanced splits, so one extreme run beside the change would
    pull the date off by a run.'''
    x = numpy.asarray(values, dtype=float)
    best, best_k = math.inf, None
    for k in range(min_segment, len(x) - min_segment + 1):
        left, right = x[:k], x[k:]
        cost = (numpy.abs(left - numpy.median(left)).sum() +
                numpy.abs(right - numpy.median(right)).sum())
        if cost < best:
            best, best_k = cost, k
    return best_k


def change_points(values, alpha=ALPHA, min_segment=MIN_SEGMENT):
    '''[(index, p)] of every change point found by binary segmentation
    with :func:`change_point_test` (whether) and :func:`locate` (where), in
    order; each segment keeps *min_segment* runs. Where a segment shows no
    change as a whole, its halves are searched too (a shift that came and
    went), :data:`MAX_HALVINGS` deep; the false alarms this costs are
    measured in bench/README.md.'''
    found = []

    def search(lo, hi, halvings=0):
        if hi - lo < 2 * min_segment:
            return
        k, p = change_point_test(values[lo:hi], min_segment)
        if k is None or p >= alpha:
            # A shift that came and went (a regression, then its fix)
            # splits no segment in two: look in each half as well, twice
            # at most (each look is another chance of a false alarm).
            if hi - lo >= 4 * min_segment and halvings < MAX_HALVINGS:
                mid = (lo + hi) // 2
                search(lo, mid, halvings + 1)
                search(mid, hi, halvings + 1)
            return
        k = locate(values[lo:hi], min_segment)
        found.append((k + lo, p))
        search(lo, k + lo, halvings)
        search(k + lo, hi, halvings)

    search(0, len(values))
    return sorted(found)


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


def compare_windows(before, after, higher_is_better=True,
                    alpha=ALPHA, min_change=MIN_CHANGE):
    '''(effect, low, high, p, flagged, worse) of *after* against *before*.'''
    center = statistics.median(before)
    effect = statistics.median(after) / center - 1 if center else math.nan
    low, high = bootstrap_ratio(before, after)
    p = (1.0 if len(set(before) | set(after)) == 1 else
         mann_whitney_p(after, before))
    worse = effect < 0 if higher_is_better else effect > 0
    flagged = p < alpha and abs(effect) >= min_change
    return effect, low, high, p, flagged, worse


def latest_change(values, times, higher_is_better=True, alpha=ALPHA,
                  min_change=MIN_CHANGE, window=WINDOW,
                  min_segment=MIN_SEGMENT):
    '''The most recent :class:`Change` in a case's series (passing runs'
    values in time order), or None where the history has no change point.
    The runs compared are the last *window* before the change point (not
    reaching back over an earlier change point) and the first *window*
    after it (not reaching past a later one). The search covers the
    latest :data:`MAX_HISTORY` runs.'''
    skipped = max(0, len(values) - MAX_HISTORY)
    values, times = values[skipped:], times[skipped:]
    points = change_points(values, alpha, min_segment)
    if not points:
        return None
    bounds = [0] + [k for k, _ in points] + [len(values)]
    k, p_point = points[-1]
    start = max(bounds[-3], k - window)
    before = values[start:k]
    after = values[k:min(bounds[-1], k + window)]
    effect, low, high, p, flagged, worse = compare_windows(
        before, after, higher_is_better, alpha, min_change)
    return Change(skipped + k, times[k], len(before), len(after), effect,
                  low, high, p, p_point, flagged, worse)
