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
from hpctestlib_ml import flops, model_info, program_tables, settings
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.parsers import torchvision_bench as parser
from hpctestlib_ml.registry import Headline, Workload

#: The program's ``--size`` presets: its own table
#: (``src/torchvision_resnet50/sizes.py``, read from the file, no torch).
PROGRAM_SIZES = program_tables.load('torchvision_resnet50', 'sizes').SIZES

#: What the program trains in by device: fp32, or with ``--use-amp``
#: autocast's default type (fp16 on GPUs, bf16 on CPUs).
PRECISIONS = {'cpu': ('fp32', 'bf16'), 'gpu': ('fp32', 'fp16')}


def check_size(preset, **more):
    '''The check's size of the program's *preset* (its settings as the
    check names them: the timed steps are its iterations x batches per
    iteration), with *more*.'''
    size = PROGRAM_SIZES[preset]
    return {'image_size': size['image_size'],
            'batch_size': size['batch_size'],
            'steps': size['num_batches_per_iter'] * size['num_iters'],
            'batches_per_iteration': size['num_batches_per_iter'],
            'warmup_batches': size['num_warmup_batches'], **more}


def training_flops(image_size):
    '''Training FLOPs per image at *image_size* (torchvision's ResNet v1.5).'''
    return flops.training_flops(flops.resnet50_forward_flops(image_size))


def build_model_info(size, device):
    '''torchvision's ``resnet50(weights=None)`` at *size*'s image side,
    as the program builds it.'''
    sizes = WORKLOAD.sizes
    if size not in sizes:
        raise model_info.ModelInfoError(
            f'torchvision_resnet50: unknown size {size!r}: use '
            f'{" or ".join(sizes)}')
    image = sizes[size]['image_size']
    program_tables.importable()
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


#: The count and FLOPs torchvision publishes for the model at benchmark
#: size (224 px): ``ResNet50_Weights.IMAGENET1K_V1.meta``'s
#: ``num_params`` and ``_ops``.
PUBLISHED = {'benchmark': (Published(
    25_557_032, "torchvision's resnet50 (ResNet v1.5), 1000 classes: its "
    "IMAGENET1K weights' num_params, and 4.089 GFLOPS (multiply-adds) at "
    "224 px",
    'https://pytorch.org/vision/stable/models/generated/'
    'torchvision.models.resnet50.html',
    flops=4.089e9, flops_per_multiply_add=1),)}


WORKLOAD = Workload(
    name='torchvision_resnet50', check='TorchvisionResNet50',
    program='torchvision_resnet50', parser=parser,
    headline=Headline('images_per_second'),
    sizes={'tiny': check_size('tiny', time_limit='15m'),
           'benchmark': check_size('benchmark', precision='fp32',
                                   time_limit='30m')},
    throughput_metric='images_per_second',
    # Its program times each rank's forward passes (src/rank_compute.py).
    prints_rank_compute=True,
    model_info=build_model_info,
    published=PUBLISHED,
    optimizer='sgd', data='one synthetic batch per rank, made on its device',
    precisions=PRECISIONS,
    variables=settings.variables('torchvision_resnet50', [
        ('image_size', 'int', None, "image side in pixels; default: the "
         "size's", {'minimum': 1}),
        ('batches_per_iteration', 'int', None, 'steps timed together; '
         "default: the size's", {'minimum': 1}),
        ('warmup_batches', 'int', None, "untimed steps first; default: "
         "the size's", {'minimum': 0}),
    ]))
