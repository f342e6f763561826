"""DeepCAM (MLPerf HPC): DeepLabV3+ segmentation of climate fields, the
check. The workload (sizes, FLOPs, precision, model builder):
:mod:`hpctestlib_ml.registry.deeplabv3plus`."""
from reframe.core.builtins import performance_function

from hpctestlib_ml.registry import deeplabv3plus
from hpctestlib_ml.workloads.mlperf import MLLogTraining


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
    data_extra = 'deepcam_data'

    def model_flops_per_sample(self):
        return deeplabv3plus.training_flops(self.model)

    @performance_function('')
    def eval_iou(self):
        '''The reference's IoU (per sample, the mean over the three classes)
        on held-out batches; MLPerf's target after a full run: 0.82.'''
        return self.metric('eval_accuracy')
