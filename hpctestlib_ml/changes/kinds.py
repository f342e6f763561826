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
- **noise**: within a stretch of one level, the square roots of the
  deviations from its median change their mean (:func:`spread_change`),
  at p below :data:`NOISE_ALPHA`, and the robust spread after is at least
  :data:`NOISE_MIN_RATIO` times the one before (or that much smaller).
  A failing fan, a noisy neighbour, a node that throttles some nights.
- **silent**: a case that ran at a steady pace and has not run for more
  than :data:`SILENT_INTERVALS` of its usual intervals (the median gap
  between its runs) before the time it is judged at.
"""
import numpy

from hpctestlib_ml.changes import nulls

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
#: Significance of a change of spread.
NOISE_ALPHA = 0.001
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


def spread_change(y):
    '''(split, p, spread before, spread after) of the most likely change
    of spread in *y* (one level: the shifts are the caller's), or None
    where none is significant and large enough: the largest two-sample t
    over the splits of the square roots of the deviations from the median
    (:func:`.nulls.root_deviations`), its p from simulated normal series
    of the same length (corrected for the search). Spreads are robust
    standard deviations on each side, in *y*'s units (relative, for the
    log values the detector passes).'''
    y = numpy.asarray(y, dtype=float)
    if len(y) < 2 * NOISE_MIN_SEGMENT:
        return None
    k, t = nulls.split_t(nulls.root_deviations(y), NOISE_MIN_SEGMENT)
    best = int(numpy.argmax(numpy.abs(t)))
    p = nulls.p_value(abs(float(t[best])), 'spread', len(y),
                      NOISE_MIN_SEGMENT)
    if p >= NOISE_ALPHA:
        return None
    k = int(k[best])
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
