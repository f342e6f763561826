"""Performance functions that report a figure of the job's log as the
parser gives it (:meth:`~hpctestlib_ml.plugins.log.JobLog.metric`), each
defined once for the checks that report it.

A check assigns one in its class body where its perflog column is to
stand: ReFrame orders a check's performance variables as its class body
declares them, its own before its bases'. ::

    samples_per_second = figures.samples_per_second
"""
from reframe.core.builtins import performance_function


def figure(name, unit, doc):
    '''The performance function *name*, in *unit*, that reports the
    log's figure *name*; *doc* says what it measures.'''
    def report(self):
        return self.metric(name)

    report.__name__ = report.__qualname__ = name
    report.__doc__ = doc
    return performance_function(unit)(report)


#: The parser's ``samples_per_second``.
samples_per_second = figure(
    'samples_per_second', 'samples/s',
    'Samples/s over all ranks, steady state (first step skipped).')

#: The parser's ``samples_per_second_per_gpu``.
samples_per_second_per_gpu = figure(
    'samples_per_second_per_gpu', 'samples/s',
    'Samples/s per GPU (rank), steady state.')

#: The parser's ``time_per_step_secs``.
time_per_step_secs = figure(
    'time_per_step_secs', 's', 'Mean seconds of a step, steady state.')
