"""CosmoFlow (MLPerf HPC), PyTorch port of the reference model: the check.
The workload (sizes, FLOPs, precision, model builder):
:mod:`hpctestlib_ml.registry.cosmoflow`."""
from reframe.core.builtins import performance_function

from hpctestlib_ml.registry import cosmoflow
from hpctestlib_ml.workloads.mlperf import MLLogTraining


class CosmoFlowTraining(MLLogTraining):
    '''CosmoFlow regression training with MLPerf-style logs.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``model``, ``data`` (:class:`~hpctestlib_ml.workloads.mlperf.MLLogTraining`)
       * - Metrics
         - ``samples_per_second`` (samples/s),
           ``samples_per_second_per_gpu`` (samples/s),
           ``time_per_step_secs`` (s), ``run_time_secs`` (s), ``eval_mae``
       * - Partition extras
         - ``cosmoflow_data``
    '''

    workload = 'cosmoflow'
    data_extra = 'cosmoflow_data'

    def model_flops_per_sample(self):
        return cosmoflow.training_flops(self.model)

    @performance_function('')
    def eval_mae(self):
        '''Mean absolute error of the four parameters on held-out batches
        (the reference's target: 0.124 after full training).'''
        return self.metric('eval_error')
