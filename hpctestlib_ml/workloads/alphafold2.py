"""AlphaFold2 (MLPerf HPC OpenFold): OpenFold's initial training, the
check. The workload (sizes, FLOPs, precision, model builder):
:mod:`hpctestlib_ml.registry.alphafold2`."""
from reframe.core.builtins import performance_function

from hpctestlib_ml.registry import alphafold2
from hpctestlib_ml.workloads.mlperf import MLLogTraining


class AlphaFold2Training(MLLogTraining):
    '''AlphaFold2 training with MLPerf-style logs.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``model``, ``data`` (:class:`~hpctestlib_ml.workloads.mlperf.MLLogTraining`)
       * - Metrics
         - ``samples_per_second`` (samples/s),
           ``samples_per_second_per_gpu`` (samples/s),
           ``time_per_step_secs`` (s), ``run_time_secs`` (s),
           ``eval_lddt_ca``
       * - Partition extras
         - ``openfold_data``
    '''

    workload = 'alphafold2'
    data_extra = 'openfold_data'

    def model_flops_per_sample(self):
        return alphafold2.training_flops(self.model)

    def recomputes_activations(self):
        # The reference size recomputes every block in the backward pass.
        return self.model == 'reference'

    def recomputed_flops_factor(self):
        '''Recomputation repeats the trained run's forward only, not the
        recycles' (without gradients): (4 + r) / (3 + r) forwards for r
        recycles on average (reference: 5.5 / 4.5).'''
        recycles = alphafold2.mean_recycles(self.model)
        return (4 + recycles) / (3 + recycles)

    @performance_function('')
    def eval_lddt_ca(self):
        '''lDDT-Ca of the predicted structures on held-out proteins
        (MLPerf HPC OpenFold's ``eval_accuracy``; target 0.8).'''
        return self.metric('eval_accuracy')
