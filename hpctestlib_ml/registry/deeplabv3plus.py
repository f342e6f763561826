"""DeepCAM (MLPerf HPC): DeepLabV3+ segmentation of climate fields.

``src/deepcam`` trains the MLPerf HPC reference's DeepLabv3+ (aligned
Xception encoder, dense atrous ASPP, transposed-convolution decoder;
56,454,720 parameters at 16 channels and 3 classes) as the reference does:
16 x 768 x 1152 fields at ``reference`` size, the same architecture
narrower on 16 x 128 x 192 crops at ``tiny``. Synthetic fields by
default; ``.npz`` samples with ``-S data=DIR`` or the partition's
``extras['deepcam_data']``. Quality: the reference's IoU.
"""
from hpctestlib_ml import flops, model_info, program_tables, settings
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.flops import conv2d_flops
from hpctestlib_ml.registry import PrecisionChoice
from hpctestlib_ml.registry.mlperf import mllog_workload, model_and_data

#: What the benchmark size trains in, and the reference.
PRECISION = PrecisionChoice(
    'fp16', 'fp32',
    'MLPerf HPC v3.0 closed DeepCAM (mlcommons/hpc_results_v3.0 '
    '350e46f): NVIDIA, Dell, HPE+LBNL and Clemson log precision_mode '
    '"amp", which NVIDIA\'s driver/trainer.py runs as fp16 autocast '
    '(bf16 only for "amp-bf16"); the reference (mlcommons/hpc deepcam, '
    'utils/parser.py) has no mixed precision')


def architecture():
    '''The program's ``deepcam.architecture`` module (sizes and widths;
    no torch), read from its file: one table for the program and the
    FLOPs here.'''
    return program_tables.load('deepcam', 'architecture')


def network_forward_flops(arch, channels, height, width, classes):
    '''Forward FLOPs of one sample through DeepCAM's DeepLabv3+
    (``src/deepcam``; *arch* is its :class:`deepcam.architecture.
    Architecture`): every convolution, layer by layer at its resolution;
    batch norm, ReLU, pooling and the residual sums add < 1%. Reference
    (16 x 768 x 1152, 3 classes): 0.655 TFLOP forward per sample.'''
    def separable(h, w, c_in, c_out):
        return (conv2d_flops(h, w, c_in, c_in, 3, groups=c_in) +
                conv2d_flops(h, w, c_in, c_out))

    def half(n):
        return (n + 1) // 2

    h, w = half(height), half(width)                # strided stem conv
    s0, s1 = arch.stem
    total = conv2d_flops(h, w, channels, s0, 3) + conv2d_flops(h, w, s0, s1, 3)
    c, low = s1, None
    for out in arch.entry:                          # 2 units + strided conv
        total += separable(h, w, c, out) + separable(h, w, out, out)
        h, w = half(h), half(w)
        total += separable(h, w, out, out) + conv2d_flops(h, w, c, out)
        c = out
        low = low or (h, w, out)
    total += arch.middle_blocks * 3 * separable(h, w, c, c)
    e = arch.exit_block                             # units grow last, extra
    total += (separable(h, w, c, c) + separable(h, w, c, e) +
              separable(h, w, e, e) + conv2d_flops(h, w, c, e))
    c = e
    for out in arch.exit_convs:
        total += separable(h, w, c, out)
        c = out
    a = arch.aspp                                   # ASPP
    total += (conv2d_flops(h, w, c, a) +
              len(arch.aspp_rates) * conv2d_flops(h, w, c, a, 3) +
              conv2d_flops(1, 1, c, a) +
              conv2d_flops(h, w, a * (len(arch.aspp_rates) + 2), a))
    d = arch.decoder                                # decoder
    lh, lw, lc = low
    total += (conv2d_flops(h, w, a, d, 3) + conv2d_flops(2 * h, 2 * w, d, d, 3)
              + conv2d_flops(lh, lw, lc, arch.low_level))
    total += (conv2d_flops(lh, lw, d + arch.low_level, d, 3) +
              conv2d_flops(lh, lw, d, d, 3) + conv2d_flops(lh, lw, d, d))
    total += (conv2d_flops(lh, lw, d, d, 3) +
              conv2d_flops(2 * lh, 2 * lw, d, classes, 3))
    return total


def forward_flops(model):
    '''Forward FLOPs per sample of DeepCAM's network at size *model*.'''
    arch = architecture()
    channels, height, width, widths = arch.SIZES[model]
    return network_forward_flops(widths, channels, height, width,
                                 arch.CLASSES)


def training_flops(model):
    '''Training FLOPs per sample at size *model*.'''
    return flops.training_flops(forward_flops(model))


def build_model_info(size, device):
    name = model_info.named_size(size, WORKLOAD.sizes, 'model')
    program_tables.importable()
    from deepcam import model as program
    channels, height, width, _ = architecture().SIZES[name]
    device = device or ('cpu' if name == 'tiny' else 'meta')
    with model_info.built_on(device):
        model = program.build(name)
    return model_info.torch_info(
        'deeplabv3plus', size, name, model,
        lambda dev: (program.example_input(name, device=dev),),
        forward_flops(name), device,
        f'DeepLabv3+ (MLPerf HPC DeepCAM reference network), one '
        f'{channels} x {height} x {width} sample, 3 classes')


#: The count published for the model at benchmark size: MLPerf HPC
#: DeepCAM's reference network.
PUBLISHED = {'benchmark': (Published(
    56_454_720, "MLPerf HPC DeepCAM's reference DeepLabv3+ (aligned "
    "Xception encoder, ASPP, decoder) at 16 channels and 3 classes",
    'https://github.com/mlcommons/hpc/blob/main/deepcam/src/deepCam/'
    'architecture/deeplab_xception.py'),)}


WORKLOAD = mllog_workload(
    name='deeplabv3plus', check='DeepLabV3Plus', program='deepcam',
    sizes={
        'tiny': {'model': 'tiny', 'batch_size': 2, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 2, 'steps': 50,
                      'precision': PRECISION.benchmark, 'time_limit': '1h'},
    },
    precision_choice=PRECISION, model_info=build_model_info,
    published=PUBLISHED,
    optimizer='adamw', benchmark='deepcam',
    # MLPerf HPC 3.0.0's rules.
    mlperf_rules=('hpc', '3.0.0'),
    data="synthetic climate fields (or a site's samples)",
    names_note='the network is DeepLabV3+; deepcam is the MLPerf HPC '
               'benchmark that trains it (mlcommons/hpc deepcam)',
    variables=model_and_data('deeplabv3plus', 'deepcam', 'architecture', 'SIZES'),
    extras=settings.extras_keys('deeplabv3plus', [
        ('deepcam_data', 'path', None, 'a directory of DeepCAM samples',
         {'allowed': 'a directory'}),
    ]))
