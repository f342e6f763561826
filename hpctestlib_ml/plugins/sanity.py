"""Sanity: a run passes when the job ended by itself, every rank ran on
the partition's devices, and the log passes the workload's checks; else
one line says why, starting with its category (the reading:
:mod:`hpctestlib_ml.parsers.failures`, :mod:`hpctestlib_ml.triage`,
:mod:`hpctestlib_ml.device_check`)."""
from reframe.core.builtins import sanity_function
from reframe.core.exceptions import SanityError
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import device_check, triage
from hpctestlib_ml.parsers import failures


class Sanity(RegressionTestPlugin):
    '''The sanity function of every workload.'''

    @sanity_function
    def assert_training_ran(self):
        '''The job ended by itself (not by the hang watch: where the
        scheduler gives no exit status, srun's "Terminated" is all the log
        says of its end), exited 0, no rank died or raised, and the log
        passes the workload's checks; else a one-line reason.'''
        text = self.log_text()
        if triage.hang(text) or failures.failure_reason(
                text, self.job.state, self.job.exitcode):
            raise SanityError(self.failure_message(text))
        problems = self.device_problems() + self.log_problems(text)
        if problems:
            raise SanityError(problems_message(problems))
        return True

    def device_problems(self):
        '''Why the ranks' ``device`` records do not show the partition's
        devices (:func:`hpctestlib_ml.device_check.device_problems`); []
        where they do, or where the program prints no records.'''
        if not self.prints_device_records():
            return []
        return device_check.device_problems(
            self.device_records(), 'gpu' if self.uses_gpus else 'cpu',
            self.layout.world_size, self.current_partition.fullname,
            self.partition_gpu_model(),
            bool(self.current_partition.extras.get('device_peak_flops')))

    def failure_message(self, text):
        '''Why the job failed, its category first (``out_of_memory: job
        failed (exit code 1): rank 1 on n2 ...``), with the fix where the
        suite knows it; a hang as the hang watch said it (``hang: rank 1
        on n2 stopped at step 57 in ...``).'''
        found = triage.triage(text, self.job.state, self.job.exitcode)
        if found.category == 'hang':
            # The watch ended the job: its exit status says nothing more.
            return f'hang: {found.reason}'
        reason = found.reason
        end = failures.job_end(text, self.job.state)
        if end and end.kind == 'timeout':
            limit = (f'{self.time_limit:g} s' if self.time_limit else
                     "the partition's default")
            reason += (f': the time limit was {limit}; raise it with '
                       f'-S time_limit= or run fewer -S steps=')
        exitcode = self.job.exitcode
        prefix = ('job failed' if exitcode in (0, None) else
                  f'job failed (exit code {exitcode})')
        category = found.category or triage.DEFAULT_CATEGORY
        return f'{category}: {prefix}: {reason}'


def problems_message(problems):
    '''The one-line failure of a run that ended well but whose log or
    device records show *problems*: their category first
    (:func:`hpctestlib_ml.triage.problems_category`), then each.'''
    return f'{triage.problems_category(problems)}: ' + '; '.join(problems)
