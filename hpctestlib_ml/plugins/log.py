"""JobLog: the job's log, read once per case: its text, the workload's
parser's record of it, and the programs' ``[hpcml]`` records.

A bottom plugin (with :mod:`~hpctestlib_ml.plugins.workload`): it calls
the workload's ``extract_metrics`` and imports no other plugin.
"""
import os

from reframe.core.exceptions import SanityError
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml.parsers import hpcml_records


class JobLog(RegressionTestPlugin):
    '''The job's stdout and stderr, and what they say, read once.'''

    def log_text(self):
        '''The job's stdout and stderr (the programs log to either).'''
        if getattr(self, '_log_text', None) is None:
            parts = []
            for name in (self.stdout.evaluate(), self.stderr.evaluate()):
                path = os.path.join(self.stagedir, name)
                if os.path.exists(path):
                    with open(path, errors='replace') as fp:
                        parts.append(fp.read())
            self._log_text = '\n'.join(parts)
        return self._log_text

    def metrics(self):
        '''The log as the workload's parser reads it, once per case: a
        :class:`~hpctestlib_ml.metrics.TrainingLog`.'''
        if getattr(self, '_metrics', None) is None:
            self._metrics = self.extract_metrics(self.log_text())
        return self._metrics

    def metric(self, name):
        '''Figure *name* of :meth:`metrics` (its ``figures``); a sanity
        error where the log has none.'''
        value = self.metrics().figures.get(name)
        if value is None:
            raise SanityError(f'{name}: not found in the log')
        return value

    def log_records(self, type_):
        '''The ranks' ``[hpcml]`` records of type *type_* in the log, read
        once per case.'''
        if getattr(self, '_log_records', None) is None:
            self._log_records = {}
        if type_ not in self._log_records:
            self._log_records[type_] = hpcml_records.records(
                self.log_text(), type_)
        return self._log_records[type_]

    def device_records(self):
        '''The ranks' ``[hpcml] device`` records ([] where the program
        prints none).'''
        return self.log_records('device')
