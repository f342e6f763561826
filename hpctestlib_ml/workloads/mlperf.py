"""Base of the workloads whose programs log MLPerf events (``:::MLLOG``):
BERT, CosmoFlow (and DeepCAM, OpenFold). The events are read by
:mod:`hpctestlib_ml.parsers.mllog`; this class adds the checks and figures
they share."""
from reframe.core.builtins import performance_function, variable

from hpctestlib_ml import inputs
from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.parsers import mllog as parser
from hpctestlib_ml.parsers import throughput
from hpctestlib_ml.plugins import figures


def log_problems(log, steps, world_size):
    '''One-line reasons why an MLPerf log (a
    :class:`~hpctestlib_ml.metrics.TrainingLog` of
    :func:`~hpctestlib_ml.parsers.mllog.training_log`) shows a bad run of
    *steps* steps on *world_size* ranks; [] if none. Beyond the common checks,
    the suite's MLPerf programs log a loss every step, and MLPerf's
    ``run_stop`` says whether the run succeeded.'''
    if not log.figures['events']:
        return ['no :::MLLOG event in the log']
    problems = common_problems(log, steps, world_size, loss_required=True)
    status = log.figures['status']
    if status != 'success':
        problems.insert(0, f'run_stop status {status!r}, not success')
    return problems


class MLLogTraining(MLTrainingTest):
    '''A training test whose program logs MLPerf events, one
    ``tracked_stats`` per step, and the world size it ran with.'''

    #: Partition extras key naming a dataset for :attr:`data`.
    data_extra = None

    #: The program's model size (``--size``); default: the size's.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    model = variable(str, type(None), value=None)

    #: ``synthetic`` or the path of a dataset the program reads; default:
    #: the partition's ``extras[data_extra]``, else synthetic.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (``extras[data_extra]``, else ``synthetic``)
    data = variable(str, type(None), value=None)

    def finalize_settings(self):
        self.data_source = '-S data'
        if self.data is None:
            self.data_source = f'extras[{self.data_extra!r}]'
            self.data = self.current_partition.extras.get(self.data_extra,
                                                          'synthetic')
        self.reference_precision = self.declaration().reference_precision
        self.name_platform()

    def input_paths(self):
        '''The dataset's directory, unless the data are synthetic.'''
        if self.data == 'synthetic':
            return []
        return [inputs.Input(self.data_source, self.data, 'dir',
                             words=('synthetic',))]

    def name_platform(self):
        '''The MLLOG ``submission_platform``: the system and partition.'''
        self.env_vars['HPCML_PLATFORM'] = self.current_partition.fullname

    def program_args(self):
        '''The MLPerf-style programs' common options.'''
        return [str(a) for a in (
            '--size', self.model, '--batch-size', self.batch_size,
            '--steps', self.steps, '--precision', self.precision,
            '--data', self.data)]

    def extract_metrics(self, text):
        '''The parser's record, with samples/s per rank (the log's world
        size) among its figures.'''
        log = parser.training_log(text)
        log.figures['samples_per_second_per_gpu'] = throughput.per_rank(
            log.figures['samples_per_second'], log.world_size)
        return log

    def log_problems(self, text):
        return log_problems(self.metrics(), self.steps,
                            self.layout.world_size)

    samples_per_second = figures.samples_per_second
    samples_per_second_per_gpu = figures.samples_per_second_per_gpu
    time_per_step_secs = figures.time_per_step_secs

    @performance_function('s')
    def run_time_secs(self):
        '''run_stop - run_start, as MLPerf times a run.'''
        return self.metric('run_time_secs')
