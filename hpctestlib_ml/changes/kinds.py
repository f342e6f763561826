"""What is not a shift in the level of a series: one odd run
(``outlier``), a change of spread with the level unchanged (``noise``),
and a case that stopped running (``silent``). Used by :mod:`hpctestlib_ml.changes`,
which finds the shifts.

- An **outlier** is one run far from its neighbours, whose neighbours on
  both sides agree with each other: more than :data:`OUTLIER_Z` robust
  standard deviations (1.4826 x the median absolute deviation of up to
  :data:`NEIGHBOURS` runs on each side) from their median. The newest run
  has neighbours on one side only: odd, it is an outlier until the next
  run says whether the level moved. An outlier moves no reference and
  dates no change: the shift search leaves it out.
- **noise**: within a stretch of one level, the absolute deviations from
  its median change their level: the rank change-point statistic (after
  A. N. Pettitt, "A non-parametric approach to the change-point problem",
  Applied Statistics 28:126, 1979) with a permutation p-value below
  :data:`NOISE_ALPHA`, and the robust spread after at least
  :data:`NOISE_MIN_RATIO` times the one before (or that much smaller).
  A failing fan, a noisy neighbour, a node that throttles some nights.
- **silent**: a case that ran at a steady pace and has not run for more
  than :data:`SILENT_INTERVALS` of its usual intervals (the median gap
  between its runs) before the time it is judged at.
"""
import numpy

#: Robust standard deviations from its neighbours' median that make a
#: run odd. Normal noise passes 5 sigma once in 1.7 million runs; a
#: neighbourhood of 10 runs estimates sigma within about 30 %.
OUTLIER_Z = 5.0
#: Runs on each side an outlier is judged against.
NEIGHBOURS = 5
#: Runs on each side whose successive differences also give the scale.
SCALE_RUNS = 15
#: Fewest neighbours (both sides together) an outlier is judged with.
MIN_NEIGHBOURS = 4
#: Significance of a change of spread (rank change point, permutations).
NOISE_ALPHA = 0.001
#: Permutations of the spread test (its smallest p is 1 / (this + 1)).
NOISE_PERMUTATIONS = 4999
#: A change of spread smaller than this ratio is not reported.
NOISE_MIN_RATIO = 1.5
#: Fewest runs on either side of a change of spread.
NOISE_MIN_SEGMENT = 5
#: Usual intervals without a run that make a case silent.
SILENT_INTERVALS = 4
#: Fewest runs a case needs before its silence is judged.
SILENT_MIN_RUNS = 5
#: Median absolute deviation -> standard deviation for normal noise.
MAD_TO_SIGMA = 1.4826


def robust_sigma(values):
    '''1.4826 x the median absolute deviation of *values* from their
    median: the standard deviation for normal noise, unmoved by one odd
    value.'''
    x = numpy.asarray(values, dtype=float)
    if not len(x):
        return 0.0
    return MAD_TO_SIGMA * float(numpy.median(numpy.abs(x - numpy.median(x))))


def _diff_sigma(y, i):
    '''The robust standard deviation of the noise around run *i* from the
    differences of successive runs within :data:`SCALE_RUNS` of it (not
    touching it): a few neighbours' deviation is often too small by
    chance, and differences are not moved by a shift in the level.'''
    lo, hi = max(0, i - SCALE_RUNS), min(len(y), i + SCALE_RUNS + 1)
    steps = numpy.concatenate([numpy.diff(y[lo:i]), numpy.diff(y[i + 1:hi])])
    if not len(steps):
        return 0.0
    return MAD_TO_SIGMA * float(numpy.median(numpy.abs(steps))) / 2 ** 0.5


def outliers(y):
    '''Indices of the outliers of *y* (see the module's text), the newest
    run's included where it is odd.'''
    y = numpy.asarray(y, dtype=float)
    n = len(y)
    found = []
    for i in range(n):
        left = y[max(0, i - NEIGHBOURS):i]
        right = y[i + 1:i + 1 + NEIGHBOURS]
        around = numpy.concatenate([left, right])
        if len(around) < MIN_NEIGHBOURS or (not len(right) and i < n - 1):
            continue
        center = float(numpy.median(around))
        sigma = max(robust_sigma(around), _diff_sigma(y, i))
        scale = max(sigma, 1e-9 * abs(center), 1e-300)
        if abs(y[i] - center) <= OUTLIER_Z * scale:
            continue
        # Isolated: the runs on both sides agree with the others. A run
        # beside another odd one in the same direction is a level that
        # moved, not an outlier.
        beside = [j for j in (i - 1, i + 1) if 0 <= j < n]
        if all(abs(y[j] - center) <= OUTLIER_Z / 2 * scale for j in beside):
            found.append(i)
    return found


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


def _rank_split_z(ranks, min_segment):
    '''(splits, |z| per split) of the Mann-Whitney statistic of the first
    k ranks against the rest, for each row of *ranks*.'''
    n = ranks.shape[-1]
    k = numpy.arange(min_segment, n - min_segment + 1)
    sums = numpy.cumsum(ranks, axis=-1)[..., k - 1]
    u = sums - k * (k + 1) / 2
    z = numpy.abs(u - k * (n - k) / 2) / numpy.sqrt(k * (n - k) * (n + 1)
                                                    / 12)
    return k, z


def rank_change_point(values, min_segment, rounds, seed=0):
    '''(split, p): the split of *values* that maximises the standardised
    Mann-Whitney statistic, and its permutation p-value (the share of
    random orders of the same values whose best split is as extreme):
    exact for any distribution, corrected for the choice of split.'''
    if len(values) < 2 * min_segment:
        return None, 1.0
    ranks = rankdata(values)
    k, z = _rank_split_z(ranks, min_segment)
    best = int(numpy.argmax(z))
    observed = float(z[best])
    if observed == 0:
        return None, 1.0
    rng = numpy.random.default_rng(seed)
    shuffled = rng.permuted(numpy.tile(ranks, (rounds, 1)), axis=1)
    _, null = _rank_split_z(shuffled, min_segment)
    extreme = int(numpy.sum(null.max(axis=1) >= observed - 1e-12))
    return int(k[best]), (extreme + 1) / (rounds + 1)


def spread_change(y):
    '''(split, p, spread before, spread after) of the most likely change
    of spread in *y* (one level: the shifts are the caller's), or None
    where none is significant and large enough. Spreads are robust
    standard deviations of the deviations from the median, in *y*'s
    units (relative, for the log values :mod:`hpctestlib_ml.changes` passes).'''
    y = numpy.asarray(y, dtype=float)
    if len(y) < 2 * NOISE_MIN_SEGMENT:
        return None
    deviation = numpy.abs(y - numpy.median(y))
    k, p = rank_change_point(deviation, NOISE_MIN_SEGMENT,
                             NOISE_PERMUTATIONS)
    if k is None or p >= NOISE_ALPHA:
        return None
    before, after = robust_sigma(y[:k]), robust_sigma(y[k:])
    if not before or not after:
        return None
    ratio = after / before
    if 1 / NOISE_MIN_RATIO < ratio < NOISE_MIN_RATIO:
        return None
    return k, p, before, after


def silence(times, now):
    '''(usual interval, time without a run) where the case has not run
    for more than :data:`SILENT_INTERVALS` usual intervals at *now*, else
    None.'''
    if times is None or now is None or len(times) < SILENT_MIN_RUNS:
        return None
    gaps = numpy.diff(numpy.asarray(times, dtype=float))
    usual = float(numpy.median(gaps))
    quiet = float(now - times[-1])
    if usual <= 0 or quiet <= SILENT_INTERVALS * usual:
        return None
    return usual, quiet
