"""TemplateWorkload's check: the program's arguments, what its log must
show, its FLOPs per sample, its figures. The workload (sizes, parser,
FLOPs formula, model builder, settings):
:mod:`hpctestlib_ml.registry.template_workload`."""
from reframe.core.builtins import variable

from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.plugins import figures
from hpctestlib_ml.registry import template_workload


class TemplateWorkloadTraining(MLTrainingTest):
    '''A multilayer perceptron trained to regress synthetic data.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``width``, ``depth``
       * - Metrics
         - ``samples_per_second`` (samples/s),
           ``samples_per_second_per_gpu`` (samples/s),
           ``time_per_step_secs`` (s)
       * - Partition extras
         - none
    '''

    workload = 'template_workload'

    #: Features of each layer (``--width``).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    width = variable(str, int, type(None), value=None)

    #: Hidden layers (``--depth``).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    depth = variable(str, int, type(None), value=None)

    def case_settings(self):
        return [f'width={self.width}', f'depth={self.depth}',
                *super().case_settings()]

    def program_args(self):
        args = ['--width', self.width, '--depth', self.depth,
                '--batch-size', self.batch_size, '--steps', self.steps,
                '--precision', self.precision]
        if not self.uses_gpus:
            args.append('--cpu')
        return [str(a) for a in args]

    def log_problems(self, text):
        '''Every rank started, every step logged with a finite loss, and
        the loss fell.'''
        log = self.metrics()
        problems = common_problems(log, self.steps, self.layout.world_size,
                                   loss_required=True)
        if log.losses and not problems and \
                not log.loss_last < log.loss_first:
            problems.append(f'the loss did not fall ({log.loss_first} -> '
                            f'{log.loss_last})')
        return problems

    def model_flops_per_sample(self):
        return template_workload.training_flops(self.width, self.depth)

    # Its figures, as the parser gives them (a figure of its own:
    # figures.figure(name, unit, doc)).
    samples_per_second = figures.samples_per_second
    samples_per_second_per_gpu = figures.samples_per_second_per_gpu
    time_per_step_secs = figures.time_per_step_secs
