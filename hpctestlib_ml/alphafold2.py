"""AlphaFold2 (MLPerf HPC OpenFold): Evoformer training on MSA crops.

``src/alphafold2`` is a compact AlphaFold2 trunk written from the paper's
supplementary algorithms (MSA row attention with pair bias, column
attention, transitions, outer-product mean, triangle multiplicative updates
and triangle attention; distogram head) on synthetic proteins: the
``reference`` size is AlphaFold2's (c_m 256, c_z 128, 48 blocks, crop 256,
128 MSA clusters, batch 1 per GPU, block recomputation) on GPU partitions,
``tiny`` on CPUs. Quality: the distogram's bin accuracy on held-out crops.
"""
from reframe.core.builtins import performance_function

from hpctestlib_ml import flops
from hpctestlib_ml.mlperf import MLLogTraining


class AlphaFold2Training(MLLogTraining):
    '''Evoformer training with MLPerf-style logs.'''

    workload = 'alphafold2'
    program = 'alphafold2'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 1, 'steps': 20,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 1, 'steps': 50,
                      'precision': 'bf16', 'time_limit': '1h'},
    }

    def model_flops_per_sample(self):
        return flops.training_flops(
            flops.ALPHAFOLD2_FORWARD_FLOPS[self.model])

    def recomputes_activations(self):
        # The reference size recomputes every block in the backward pass.
        return self.model == 'reference'

    @performance_function('')
    def eval_distogram_accuracy(self):
        '''Top-1 distogram bin accuracy on held-out crops.'''
        return self.metric('eval_accuracy')
