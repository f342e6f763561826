"""CosmoFlow (MLPerf HPC): a 3D CNN on 4 x 128^3 dark-matter cubes.

``src/cosmoflow`` is a PyTorch port of the MLPerf HPC v1.0 reference
(mlcommons/hpc ``cosmoflow``: 5 x [Conv3D k=3 + LeakyReLU + MaxPool],
FC 128 -> 64 -> 4, dropout 0.5; 8.9M parameters), ``reference`` size on GPU
partitions (per-GPU batch 4 as the reference config), ``tiny`` (4 x 32^3,
conv_size 8) on CPUs. Synthetic cubes by default; the reference data as
NumPy samples with ``-S data=DIR`` or the partition's
``extras['cosmoflow_data']``.
"""
from hpctestlib_ml import flops, model_info, program_tables, settings
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.registry import PrecisionChoice
from hpctestlib_ml.registry.mlperf import mllog_workload, model_and_data

#: (cube side, conv_size) of the program's sizes: its own table
#: (``src/cosmoflow/sizes.py``, read from the file, no torch).
SIZES = program_tables.load('cosmoflow', 'sizes').SIZES

#: What the benchmark size trains in, and the reference.
PRECISION = PrecisionChoice(
    'fp16', 'fp32',
    'NVIDIA\'s MLPerf HPC v3.0 CosmoFlow (pytorch, configs/'
    'submission_dgx*.yaml amp: True; trainer.py torch.cuda.amp.autocast() '
    'with a GradScaler: fp16); the reference (mlcommons/hpc cosmoflow/'
    'train.py) trains fp32, fp16 (mixed_float16) only with --amp')


def forward_flops(cube, conv_size=32, channels=4, kernel=3, n_conv=5):
    '''Forward FLOPs of one CosmoFlow sample: its 3D convolutions
    (``same`` padding, each followed by a 2x pooling), > 99% of the work;
    the dense layers add < 0.1%. Reference size (4 x 128^3, conv_size 32,
    kernel 3): 68.9 GFLOP forward, 207 GFLOP per trained sample.'''
    total, width, side = 0, channels, cube
    for i in range(n_conv):
        out = conv_size * 2 ** i
        total += 2 * side ** 3 * width * out * kernel ** 3
        width, side = out, side // 2
    return total


def training_flops(model):
    '''Training FLOPs per sample of the program's size *model*.'''
    return flops.training_flops(forward_flops(*SIZES[model]))


def build_model_info(size, device):
    name = model_info.named_size(size, WORKLOAD.sizes, 'model')
    program_tables.importable()
    import torch
    from cosmoflow.model import build_model
    cube, conv_size = SIZES[name]
    device = device or 'cpu'
    with model_info.built_on(device):
        model = build_model(cube, conv_size=conv_size)

    def inputs(dev):
        return (torch.zeros(1, 4, cube, cube, cube, device=dev),)

    return model_info.torch_info(
        'cosmoflow', size, name, model, inputs,
        forward_flops(cube, conv_size), device,
        f'CosmoFlow 3D CNN, 4 x {cube}^3 cube, conv_size {conv_size}')


#: The count published for the model at benchmark size: MLPerf HPC
#: CosmoFlow's reference network.
PUBLISHED = {'benchmark': (Published(
    8_907_556, "MLPerf HPC CosmoFlow's reference model (configs/cosmo.yaml: "
    "5 convolution blocks, dense 128 and 64, 4 outputs)",
    'https://github.com/mlcommons/hpc/blob/main/cosmoflow/models/'
    'cosmoflow.py'),)}


WORKLOAD = mllog_workload(
    name='cosmoflow', check='CosmoFlow', program='cosmoflow',
    sizes={
        'tiny': {'model': 'tiny', 'batch_size': 4, 'steps': 20,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 4, 'steps': 100,
                      'precision': PRECISION.benchmark, 'time_limit': '1h'},
    },
    precision_choice=PRECISION, model_info=build_model_info,
    published=PUBLISHED,
    optimizer='sgd_momentum', benchmark='cosmoflow',
    # MLPerf HPC 3.0.0's rules.
    mlperf_rules=('hpc', '3.0.0'),
    data="synthetic cubes (or a site's NumPy samples)",
    variables=model_and_data('cosmoflow', 'cosmoflow', 'sizes', 'SIZES'),
    extras=settings.extras_keys('cosmoflow', [
        ('cosmoflow_data', 'path', None, 'a directory of CosmoFlow samples',
         {'allowed': 'a directory'}),
    ]))
