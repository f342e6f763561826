"""DeepCAM (MLPerf HPC): DeepLabV3+ segmentation of climate fields.

``src/deepcam`` trains the MLPerf HPC reference's DeepLabv3+ (aligned
Xception encoder, dense atrous ASPP, transposed-convolution decoder;
56,454,720 parameters at 16 channels and 3 classes) as the reference does:
16 x 768 x 1152 fields at ``reference`` size, the same architecture
narrower on 16 x 128 x 192 crops at ``tiny``. Synthetic fields by
default; ``.npz`` samples with ``-S data=DIR`` or the partition's
``extras['deepcam_data']``. Quality: the reference's IoU.
"""
import importlib.util

from reframe.core.builtins import performance_function

from hpctestlib_ml import flops, precisions
from hpctestlib_ml.paths import SRC_DIR
from hpctestlib_ml.mlperf import MLLogTraining


def architecture():
    '''The program's ``deepcam.architecture`` module (sizes and widths;
    no torch), read from its file: one table for the program and the
    FLOPs here.'''
    path = SRC_DIR / 'deepcam' / 'architecture.py'
    spec = importlib.util.spec_from_file_location('_deepcam_architecture',
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def forward_flops(model):
    '''Forward FLOPs per sample of DeepCAM's network at size *model*.'''
    arch = architecture()
    channels, height, width, widths = arch.SIZES[model]
    return flops.deeplabv3plus_forward_flops(widths, channels, height, width,
                                             arch.CLASSES)


class DeepCamTraining(MLLogTraining):
    '''DeepLabV3+ climate segmentation with MLPerf-style logs.'''

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
