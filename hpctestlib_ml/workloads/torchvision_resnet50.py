"""PyTorch ResNet-50 (torchvision) on synthetic ImageNet-shaped data under
DDP, as EESSI's and CSCS's PyTorch tests run it: the check. The workload
(sizes from the program's presets, FLOPs, model builder):
:mod:`hpctestlib_ml.registry.torchvision_resnet50`."""
from reframe.core.builtins import performance_function, variable

from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.registry import torchvision_resnet50


def log_problems(log, steps, world_size):
    '''One-line reasons why a log of the program (a
    :class:`~hpctestlib_ml.metrics.TrainingLog` of
    :func:`~hpctestlib_ml.parsers.torchvision_bench.training_log`) shows a bad
    run; [] if none.'''
    if log.figures['images_per_second'] is None:
        return ['no "Total img/sec" line in the log']
    return common_problems(log, steps, world_size, loss_required=True)


def batches_per_iteration(steps, wanted):
    '''The steps timed together (``--num-batches-per-iter``): *wanted*
    (the size's) where it divides *steps*, else the largest divisor of
    *steps* below it that leaves two iterations or more (one where none
    does): upstream's mean and spread need whole, equal iterations.'''
    if steps % wanted == 0:
        return wanted
    fits = [d for d in range(1, wanted) if steps % d == 0 and steps // d >= 2]
    return max(fits, default=1)


class TorchvisionResNet50Training(MLTrainingTest):
    '''torchvision's ResNet-50 trained on one synthetic batch per rank.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``image_size``, ``batches_per_iteration``, ``warmup_batches``
       * - Metrics
         - ``images_per_second`` (images/s, the ``Total`` line),
           ``images_per_second_per_gpu`` (images/s, ``Img/sec per GPU``),
           ``time_per_step_secs`` (s)
       * - Partition extras
         - none
    '''

    workload = 'torchvision_resnet50'

    #: Side of the square synthetic images, pixels.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 224, ``tiny`` 32)
    image_size = variable(str, int, type(None), value=None)

    #: Steps timed together, one figure each (``--num-batches-per-iter``);
    #: where it does not divide the steps, the largest divisor below it
    #: (:func:`batches_per_iteration`).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 10, ``tiny`` 2)
    batches_per_iteration = variable(str, int, type(None), value=None)

    #: Untimed steps before them (``--num-warmup-batches``).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 10, ``tiny`` 1)
    warmup_batches = variable(str, int, type(None), value=None)

    def finalize_settings(self):
        self.batches_per_iteration = batches_per_iteration(
            self.steps, self.batches_per_iteration)

    def program_args(self):
        args = ['--batch-size', self.batch_size,
                '--image-size', self.image_size,
                '--num-warmup-batches', self.warmup_batches,
                '--num-batches-per-iter', self.batches_per_iteration,
                '--num-iters', self.steps // self.batches_per_iteration]
        if self.precision != 'fp32':
            args.append('--use-amp')
        if not self.uses_gpus:
            args.append('--no-cuda')
        return [str(a) for a in args]

    def log_problems(self, text):
        return log_problems(self.metrics(), self.steps,
                            self.layout.world_size)

    def model_flops_per_sample(self):
        return torchvision_resnet50.training_flops(self.image_size)

    @performance_function('images/s')
    def images_per_second(self):
        '''The job's images/s: the ``Total img/sec`` line, upstream's mean
        of the timed iterations x ranks.'''
        return self.metric('images_per_second')

    @performance_function('images/s')
    def images_per_second_per_gpu(self):
        '''Images/s per GPU (rank): ``Img/sec per GPU``, the figure EESSI
        and CSCS compare.'''
        return self.metric('images_per_second_per_gpu')

    @performance_function('s')
    def time_per_step_secs(self):
        return self.metric('time_per_step_secs')
