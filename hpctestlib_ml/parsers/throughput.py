"""Throughput from a log's timed steps: what a parser reports where its
program prints what each step did (its seconds and what it counted) and
no rate of its own. One definition, so that every such parser's
``samples_per_second`` means the same.

The rate is time-weighted, the counts of the steady-state steps over
their seconds (not the mean of the steps' rates, which a slow step
weighs no more than a fast one); which steps are steady state is the
caller's (the first, warm-up, left out: :mod:`.step_lines`). Standard
library only.
"""
import statistics


def per_rank(rate, world):
    '''*rate* over *world* ranks (``..._per_gpu``); None where either is
    unknown or 0.'''
    return rate / world if rate and world else None


def figures(steady, world, count='samples'):
    '''The figures of the steady-state steps *steady*, [(seconds, count)]
    in order, on *world* ranks (None where unknown), named after what
    the steps count (*count*: ``samples``):

    - ``<count>_per_second``: their counts over their seconds, all ranks
      (the counts are the job's); None without steps or time;
    - ``<count>_per_second_per_gpu``: that per rank (:func:`per_rank`);
    - ``time_per_step_secs``: their mean seconds; None without steps.
    '''
    seconds = sum(s for s, _ in steady)
    rate = (sum(n for _, n in steady) / seconds
            if steady and seconds > 0 else None)
    return {f'{count}_per_second': rate,
            f'{count}_per_second_per_gpu': per_rank(rate, world),
            'time_per_step_secs': (statistics.fmean(s for s, _ in steady)
                                   if steady else None)}
