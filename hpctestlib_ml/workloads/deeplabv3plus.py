"""DeepCAM (MLPerf HPC): DeepLabV3+ segmentation of climate fields.

``src/deepcam`` trains the MLPerf HPC reference's DeepLabv3+ (aligned
Xception encoder, dense atrous ASPP, transposed-convolution decoder;
56,454,720 parameters at 16 channels and 3 classes) as the reference does:
16 x 768 x 1152 fields at ``reference`` size, the same architecture
narrower on 16 x 128 x 192 crops at ``tiny``. Synthetic fields by
default; ``.npz`` samples with ``-S data=DIR`` or the partition's
``extras['deepcam_data']``. Quality: the reference's IoU.
"""
from reframe.core.builtins import performance_function

from hpctestlib_ml import flops, model_info, precisions, program_tables
from hpctestlib_ml.parsers import mllog as parser
from hpctestlib_ml.workloads import Headline, Workload
from hpctestlib_ml.workloads.mlperf import MLLogTraining


def architecture():
    '''The program's ``deepcam.architecture`` module (sizes and widths;
    no torch), read from its file: one table for the program and the
    FLOPs here.'''
    return program_tables.load('deepcam', 'architecture')


def forward_flops(model):
    '''Forward FLOPs per sample of DeepCAM's network at size *model*.'''
    arch = architecture()
    channels, height, width, widths = arch.SIZES[model]
    return flops.deeplabv3plus_forward_flops(widths, channels, height, width,
                                             arch.CLASSES)


class DeepLabV3PlusTraining(MLLogTraining):
    '''DeepLabV3+ climate segmentation with MLPerf-style logs.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``model``, ``data`` (:class:`~hpctestlib_ml.workloads.mlperf.MLLogTraining`)
       * - Metrics
         - ``samples_per_second`` (samples/s),
           ``samples_per_second_per_gpu`` (samples/s),
           ``time_per_step_secs`` (s), ``run_time_secs`` (s), ``eval_iou``
       * - Partition extras
         - ``deepcam_data``
    '''

    workload = 'deeplabv3plus'
    program = 'deepcam'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 2, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 2, 'steps': 50,
                      'precision': precisions.benchmark('deeplabv3plus'),
                      'time_limit': '1h'},
    }

    data_extra = 'deepcam_data'

    def model_flops_per_sample(self):
        return flops.training_flops(forward_flops(self.model))

    @performance_function('')
    def eval_iou(self):
        '''The reference's IoU (per sample, the mean over the three classes)
        on held-out batches; MLPerf's target after a full run: 0.82.'''
        return self.metric('eval_accuracy')


def build_model_info(size, device):
    name = model_info.named_size(size, DeepLabV3PlusTraining.sizes, 'model')
    model_info.programs_importable()
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


WORKLOAD = Workload(
    name='deeplabv3plus', check='DeepLabV3Plus', program='deepcam',
    parser=parser, headline=Headline('samples_per_second'),
    model_info=build_model_info, optimizer='adamw',
    benchmark='deepcam',
    data="synthetic climate fields (or a site's samples)",
    names_note='the network is DeepLabV3+; deepcam is the MLPerf HPC '
               'benchmark that trains it (mlcommons/hpc deepcam)',
    packages=('mlperf-logging',), precisions=precisions.PROGRAM)
