"""AlphaFold2 (MLPerf HPC OpenFold): OpenFold's initial training.

``src/alphafold2`` is AlphaFold2 written from the paper's supplementary
algorithms (input, recycling and template embedding, the extra-MSA stack,
48 Evoformer blocks, the structure module with invariant point attention,
the distogram, masked-MSA, pLDDT and experimentally-resolved heads;
93,229,082 parameters at the ``reference`` size, OpenFold's count), on
synthetic proteins or OpenFold-format records (``-S data=``, or the
partition's ``extras['openfold_data']``): the ``reference`` size is MLPerf
HPC's (crop 256, 124 clusters, 1024 extra sequences, 4 templates, up to 3
recycles, batch 1 per GPU, block recomputation) on GPU partitions,
``tiny`` the same architecture on CPUs. Quality: lDDT-Ca on held-out
proteins, MLPerf HPC's target 0.8.
"""
from reframe.core.builtins import performance_function

from hpctestlib_ml import flops, precisions
from hpctestlib_ml.mlperf import MLLogTraining


class AlphaFold2Training(MLLogTraining):
    '''AlphaFold2 training with MLPerf-style logs.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``model``, ``data`` (:class:`~hpctestlib_ml.mlperf.MLLogTraining`)
       * - Metrics
         - ``samples_per_second`` (samples/s),
           ``samples_per_second_per_gpu`` (samples/s),
           ``time_per_step_secs`` (s), ``run_time_secs`` (s),
           ``eval_lddt_ca``
       * - Partition extras
         - ``openfold_data``
    '''

    workload = 'alphafold2'
    program = 'alphafold2'
    data_extra = 'openfold_data'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 1, 'steps': 20,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 1, 'steps': 50,
                      'precision': precisions.benchmark('alphafold2'),
                      'time_limit': '1h'},
    }

    def model_flops_per_sample(self):
        return flops.alphafold2_training_flops(self.model)

    def recomputes_activations(self):
        # The reference size recomputes every block in the backward pass.
        return self.model == 'reference'

    def recomputed_flops_factor(self):
        '''Recomputation repeats the trained run's forward only, not the
        recycles' (without gradients): (4 + r) / (3 + r) forwards for r
        recycles on average (reference: 5.5 / 4.5).'''
        recycles = flops.alphafold2_mean_recycles(self.model)
        return (4 + recycles) / (3 + recycles)

    @performance_function('')
    def eval_lddt_ca(self):
        '''lDDT-Ca of the predicted structures on held-out proteins
        (MLPerf HPC OpenFold's ``eval_accuracy``; target 0.8).'''
        return self.metric('eval_accuracy')
