"""DeepCAM (MLPerf HPC): DeepLabV3+ segmentation of climate fields.

``src/deepcam`` trains segmentation-models-pytorch's ``DeepLabV3Plus``
(``encoder_weights=None, in_channels=16, classes=3``) with DeepCAM's
class-weighted cross-entropy: 16 x 768 x 1152 fields and an Xception-71
encoder at ``reference`` size, 16 x 128 x 192 crops and MobileNetV2 at
``tiny``. Synthetic fields by default; ``.npz`` samples with ``-S data=DIR``
or the partition's ``extras['deepcam_data']``. Quality: mean IoU.
"""
from reframe.core.builtins import performance_function

from hpctestlib_ml import flops
from hpctestlib_ml.mlperf import MLLogTraining


class DeepCamTraining(MLLogTraining):
    '''DeepLabV3+ climate segmentation with MLPerf-style logs.'''

    workload = 'deeplabv3plus'
    program = 'deepcam'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 2, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 2, 'steps': 50,
                      'precision': 'bf16', 'time_limit': '1h'},
    }

    data_extra = 'deepcam_data'

    def model_flops_per_sample(self):
        return flops.training_flops(flops.DEEPCAM_FORWARD_FLOPS[self.model])

    @performance_function('')
    def eval_iou(self):
        '''Mean IoU of the three classes on held-out batches.'''
        return self.metric('eval_accuracy')
