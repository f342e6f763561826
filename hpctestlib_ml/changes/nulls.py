"""The statistics of the change detector (:mod:`hpctestlib_ml.changes`) and their null
distributions: how large they get in a series with no change.

Two statistics, both the two-sample t of a split of a series (the mean
after against the mean before, over the standard deviation of the noise):

- :func:`split_t`: every split of a segment, with the noise from both
  sides pooled. Its largest absolute value picks the split that fits a
  step in the mean best (the likelihood ratio of one change in the mean
  of normal noise of unknown spread is monotone in it);
- :func:`tail_t`: the last *m* runs against the runs before them, for
  each *m* of a few, with the noise of the runs before alone: what a
  nightly report asks of the newest runs, where a change has only a few
  runs after it.

Both are pivotal for normal noise (neither the level nor the spread of a
series changes their distribution), so their null distributions depend
on the series' length alone. They are simulated once, from a fixed seed
(:func:`null_maxima`), and held in memory: a p-value is the share of
simulated series whose largest statistic is at least the observed one,
which corrects for having searched every split (or every *m*) for it.
"""
import functools

import numpy

#: Simulated series per null distribution: a p-value's resolution is
#: 1 / NULL_DRAWS.
NULL_DRAWS = 20000
#: Longest series simulated whole; longer ones use this length's
#: distribution (the largest t grows as sqrt(2 log log n): 500 to 1,000
#: runs move its 0.1 % quantile by under 1 %).
MAX_SIMULATED = 500
#: Robust standard deviations beyond which :func:`winsorized` clips.
CLIP = 3.0
#: The statistics simulated: their names in :func:`simulated_maxima`.
KINDS = ('split', 'tail', 'spread')
#: Fewest runs before the tail a tail statistic is taken over.
TAIL_MIN_BEFORE = 5


def split_t(values, min_segment):
    '''(splits k, t per split) of each row of *values* (n columns): the
    pooled two-sample t of the first k values against the rest, for k in
    ``min_segment .. n - min_segment``; positive where the values after
    the split are higher.'''
    x = numpy.asarray(values, dtype=float)
    n = x.shape[-1]
    k = numpy.arange(min_segment, n - min_segment + 1)
    s1 = numpy.cumsum(x, axis=-1)
    s2 = numpy.cumsum(x * x, axis=-1)
    total1, total2 = s1[..., -1:], s2[..., -1:]
    left1, left2 = s1[..., k - 1], s2[..., k - 1]
    mean_l, mean_r = left1 / k, (total1 - left1) / (n - k)
    rss = (left2 - k * mean_l ** 2) + (total2 - left2 - (n - k) * mean_r ** 2)
    var = numpy.maximum(rss, 0.0) / (n - 2)
    with numpy.errstate(divide='ignore', invalid='ignore'):
        t = (mean_r - mean_l) / numpy.sqrt(var * (1.0 / k + 1.0 / (n - k)))
    return k, numpy.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)


def winsorized(values):
    '''Each row of *values* with every value beyond :data:`CLIP` robust
    standard deviations (1.4826 x the median absolute deviation) of the
    row's median brought back to that bound. The t statistics are
    calibrated on normal noise; a history on a shared machine has heavier
    tails (runs that met a noisy neighbour), and one far run moves a mean
    and inflates a standard deviation. Clipped, normal noise changes
    little (a value beyond 3 sigma is 1 in 370) and the nulls are
    simulated clipped too, so the calibration stays exact for it.'''
    x = numpy.asarray(values, dtype=float)
    center = numpy.median(x, axis=-1, keepdims=True)
    scale = 1.4826 * numpy.median(numpy.abs(x - center), axis=-1,
                                  keepdims=True)
    return numpy.clip(x, center - CLIP * scale, center + CLIP * scale)


def root_deviations(values):
    '''sqrt(|x - median|) of each row of *values*: a change of spread of
    x is a change of the mean of these. Of the transforms tried (the
    deviations, their square roots, their logarithms) the square root
    gave the t the most power against changes of spread by 3 to 6 times
    in 60 runs of normal noise at the same false-alarm rate: the
    deviations are skewed, their logarithms heavy-tailed near zero.
    Pivotal: neither the level nor the spread of x moves their t.'''
    x = numpy.asarray(values, dtype=float)
    return numpy.sqrt(numpy.abs(x - numpy.median(x, axis=-1, keepdims=True)))


def tail_t(values, max_after):
    '''(m, t per m) of each row of *values* (n columns): the t of the
    mean of the last m values against the mean of the n - m before them,
    over the standard deviation of those before alone, for m in ``2 ..
    max_after`` (at most ``n - TAIL_MIN_BEFORE``); positive where the last
    values are higher.'''
    x = numpy.asarray(values, dtype=float)
    n = x.shape[-1]
    m = numpy.arange(2, min(max_after, n - TAIL_MIN_BEFORE) + 1)
    s1 = numpy.cumsum(x, axis=-1)
    s2 = numpy.cumsum(x * x, axis=-1)
    nb = n - m
    before1, before2 = s1[..., nb - 1], s2[..., nb - 1]
    mean_b = before1 / nb
    mean_a = (s1[..., -1:] - before1) / m
    var_b = numpy.maximum(before2 - nb * mean_b ** 2, 0.0) / (nb - 1)
    with numpy.errstate(divide='ignore', invalid='ignore'):
        t = (mean_a - mean_b) / numpy.sqrt(var_b * (1.0 / m + 1.0 / nb))
    return m, numpy.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)


#: The lengths whose null distributions are simulated: a series of
#: another length takes the next one down, so that a report over cases of
#: every length simulates a few dozen distributions, not hundreds. Down,
#: because both statistics' large values shrink as the series grows
#: (their spread is estimated from more runs), so that errs on the side
#: of no alarm: by under 3 % of the statistic between grid lengths.
GRID = (tuple(range(4, 21)) + (22, 24, 26, 28, 30, 33, 36, 40, 45, 50, 60,
                               70, 85, 100, 125, 150, 200, 300, 400, 500))


def grid_length(n):
    '''The simulated length that stands for *n* (:data:`GRID`).'''
    return max([g for g in GRID if g <= n] or [GRID[0]])


def null_maxima(kind, n, param):
    ''':func:`simulated_maxima` for the length standing for *n*.'''
    return simulated_maxima(kind, grid_length(n), param)


@functools.lru_cache(maxsize=None)
def simulated_maxima(kind, n, param):
    '''The sorted largest statistics of :data:`NULL_DRAWS` series of *n*
    normal values (:func:`winsorized`, but for the spread's): ``kind='split'``, the largest |t| over the splits that
    keep *param* values a side; ``kind='tail'``, the largest t (one side)
    over m = 2 .. *param*; ``kind='spread'``, the largest |t| of the
    splits of :func:`root_deviations`. Deterministic (seeded by its
    arguments).'''
    n = min(n, MAX_SIMULATED)
    rng = numpy.random.default_rng([n, param, KINDS.index(kind) + 1])
    chunks, left = [], NULL_DRAWS
    rows = max(1, 250_000 // n)     # a few MB an array
    while left:
        draw = rng.standard_normal((min(rows, left), n))
        if kind != 'spread':
            draw = winsorized(draw)
        if kind == 'split':
            _, t = split_t(draw, param)
            chunks.append(numpy.abs(t).max(axis=-1))
        elif kind == 'spread':
            _, t = split_t(root_deviations(draw), param)
            chunks.append(numpy.abs(t).max(axis=-1))
        else:
            _, t = tail_t(draw, param)
            chunks.append(t.max(axis=-1))
        left -= len(draw)
    return numpy.sort(numpy.concatenate(chunks))


def p_value(observed, kind, n, param):
    '''The share of series of *n* normal values whose largest statistic
    (:func:`null_maxima`) is at least *observed*, counting the observed
    series among them (never 0).'''
    maxima = null_maxima(kind, n, param)
    beyond = len(maxima) - numpy.searchsorted(maxima, observed - 1e-12)
    return float((beyond + 1) / (len(maxima) + 1))
