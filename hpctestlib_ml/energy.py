"""Energy of a run's timed region, from the per-node samples that
``src/energy_sampler.py`` writes (``hpcml_energy.<node>.csv``: Unix time and
one cumulative-joules column per counter source).

The window is the log's timed region (:mod:`hpctestlib_ml.parsers.
timed_window`), so start-up, model build and evaluation are not counted.
One sampler per node, never one per rank: per-rank samplers multiply a
node's energy by its ranks. A window with fewer than :data:`MIN_SAMPLES`
samples in it gets no figure: the sampler reads every 0.2 s, so that is a
timed region under about 2 s, too short for the counters' own update
period and the interpolation at its ends to be small beside it.
"""
import bisect
import glob
import os

SAMPLES_GLOB = 'hpcml_energy.*.csv'
#: Fewest samples inside the timed region for an energy figure.
MIN_SAMPLES = 10


class NoEnergy(LookupError):
    '''Why a run has no energy figure.'''


def read_samples(path):
    '''(label, times, cumulative joules summed over the sources) of one
    node's file; NoEnergy with the sampler's reason if it had no counter.'''
    with open(path) as fp:
        lines = fp.read().splitlines()
    if not lines:
        raise NoEnergy(f'{os.path.basename(path)} is empty')
    first = lines[0]
    if first.startswith('# none:'):
        raise NoEnergy(first[len('# none:'):].strip())
    label = first.lstrip('# ').strip()
    times, joules = [], []
    for line in lines[2:]:
        fields = line.split(',')
        try:
            values = [float(f) for f in fields]
        except ValueError:
            continue                 # a line cut short when the job ended
        if len(values) >= 2:
            times.append(values[0])
            joules.append(sum(values[1:]))
    return label, times, joules


def _at(times, joules, t):
    '''Cumulative joules at *t*, linear between samples.'''
    i = bisect.bisect_left(times, t)
    if i == 0:
        return joules[0]
    if i == len(times):
        return joules[-1]
    t0, t1 = times[i - 1], times[i]
    return joules[i - 1] + (joules[i] - joules[i - 1]) * (t - t0) / (t1 - t0)


def window_energy(times, joules, start, stop):
    '''Joules spent between *start* and *stop*; NoEnergy unless the samples
    cover the window with at least :data:`MIN_SAMPLES` inside it.'''
    if len(times) < 2 or times[0] > start or times[-1] < stop:
        span = (f'{times[0]:.1f}-{times[-1]:.1f}' if times else 'nothing')
        raise NoEnergy(f'the samples ({span}) do not cover the timed region '
                       f'{start:.1f}-{stop:.1f}')
    inside = bisect.bisect_right(times, stop) - bisect.bisect_left(times,
                                                                   start)
    if inside < MIN_SAMPLES:
        raise NoEnergy(f'{inside} energy samples in the timed region '
                       f'({stop - start:.1f} s), fewer than {MIN_SAMPLES}: '
                       f'run more steps (-S steps=) for an energy figure')
    return _at(times, joules, stop) - _at(times, joules, start)


def run_energy(directory, window, nodes):
    '''(joules over all nodes, seconds, source label) of the timed region
    *window*, from the sample files in *directory*; NoEnergy with the
    reason where there is none.'''
    if window is None:
        raise NoEnergy('the log has no timestamps of its timed region')
    paths = sorted(glob.glob(os.path.join(directory, SAMPLES_GLOB)))
    if not paths:
        raise NoEnergy('no energy samples (src/energy_sampler.py did not run)')
    if len(paths) != nodes:
        raise NoEnergy(f'{len(paths)} of {nodes} nodes wrote energy samples')
    total, labels = 0.0, set()
    for path in paths:
        label, times, joules = read_samples(path)
        total += window_energy(times, joules, *window)
        labels.add(label)
    return total, window[1] - window[0], '+'.join(sorted(labels))


RSS_GLOB = 'hpcml_rss.*.txt'


def peak_rss_mib(directory):
    '''The largest peak resident set of a training process (MiB) the node
    samplers saw (``hpcml_rss.<node>.txt``), or None.'''
    peaks = []
    for path in glob.glob(os.path.join(directory, RSS_GLOB)):
        with open(path) as fp:
            fields = fp.read().split()
        if len(fields) == 2 and fields[1].isdigit():
            peaks.append(int(fields[1]) / 1024)
    return max(peaks) if peaks else None
