"""PyTorch ResNet-50 (torchvision) on synthetic ImageNet-shaped data under
DDP: the ML test EESSI's test-suite (``PyTorch_torchvision``) and
cscs-reframe-tests (``pytorch_test_base.py``) run, so that a centre can
set the suite's images/s beside theirs.

``src/torchvision_resnet50`` is Horovod's and EESSI's
``pytorch_synthetic_benchmark.py`` (its arguments, defaults, figures and
lines; where it departs, and why: its docstring), plus the suite's
records. ``benchmark`` size: EESSI's defaults (batch 32 per GPU, 224 px,
10 warm-up batches, 10 iterations of 10 batches, fp32); CSCS's figure
(980 images/s per GPU) is at ``-S batch_size=512``. ``tiny``: 32 px, batch
4, for CPUs. Precision ``fp16`` (GPUs) and ``bf16`` (CPUs) are upstream's
``--use-amp``, EESSI's ``mixed``.
"""
from reframe.core.builtins import performance_function, variable

from hpctestlib_ml import flops, model_info, precisions
from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.parsers import torchvision_bench as parser
from hpctestlib_ml.workloads import Headline, Workload

def log_problems(log, steps, world_size):
    '''One-line reasons why a log of the program (a :class:`~hpctestlib_ml.
    metrics.TrainingLog` of :func:`~hpctestlib_ml.parsers.
    torchvision_bench.training_log`) shows a bad run; [] if none.'''
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
    program = 'torchvision_resnet50'
    throughput_metric = 'images_per_second'
    sizes = {
        'tiny': {'image_size': 32, 'batch_size': 4, 'steps': 6,
                 'batches_per_iteration': 2, 'warmup_batches': 1,
                 'time_limit': '15m'},
        'benchmark': {'image_size': 224, 'batch_size': 32, 'steps': 100,
                      'batches_per_iteration': 10, 'warmup_batches': 10,
                      'precision': 'fp32', 'time_limit': '30m'},
    }

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

    def prints_rank_compute(self):
        '''Its program times each rank's forward passes
        (``src/rank_compute.py``).'''
        return True

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
        return flops.training_flops(
            flops.resnet50_forward_flops(self.image_size))

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


def build_model_info(size, device):
    '''torchvision's ``resnet50(weights=None)`` at *size*'s image side,
    as the program builds it.'''
    sizes = TorchvisionResNet50Training.sizes
    if size not in sizes:
        raise model_info.ModelInfoError(
            f'torchvision_resnet50: unknown size {size!r}: use '
            f'{" or ".join(sizes)}')
    image = sizes[size]['image_size']
    model_info.programs_importable()
    import torch
    from torchvision_resnet50.__main__ import build_model
    device = device or 'meta'
    model = build_model('resnet50', torch.device(device), False)

    def inputs(dev):
        return (torch.zeros(1, 3, image, image, device=dev),)

    return model_info.torch_info(
        'torchvision_resnet50', size, 'resnet50', model, inputs,
        flops.resnet50_forward_flops(image), device,
        f'torchvision resnet50 (ResNet v1.5), one {image} x {image} image')


WORKLOAD = Workload(
    name='torchvision_resnet50', check='TorchvisionResNet50',
    program='torchvision_resnet50', parser=parser,
    headline=Headline('images_per_second'), model_info=build_model_info,
    optimizer='sgd', data='one synthetic batch per rank, made on its device',
    precisions=precisions.TORCHVISION)
