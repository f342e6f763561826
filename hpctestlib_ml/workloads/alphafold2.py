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

from hpctestlib_ml import flops, model_info, precisions
from hpctestlib_ml.parsers import mllog as parser
from hpctestlib_ml.workloads import Headline, Workload
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


def build_model_info(size, device):
    name = model_info.named_size(size, AlphaFold2Training.sizes, 'model')
    model_info.programs_importable()
    import torch
    from alphafold2 import proteins, sizes
    spec = sizes.SIZES[name]
    device = device or ('cpu' if name == 'tiny' else 'meta')
    with model_info.built_on(device):
        model = proteins.build_model(spec)
    features, _ = next(proteins.synthetic_proteins(
        1, spec, torch.Generator().manual_seed(0)))

    def inputs(dev):
        # One run through the network: no recycling (the FLOPs per
        # sample add the recycles' forwards, flops.alphafold2_...).
        return tuple(t.to(dev) for t in features) + (0,)

    cfg = model.cfg
    return model_info.torch_info('alphafold2', size, name, model, inputs,
                       flops.ALPHAFOLD2_FORWARD_FLOPS[name], device,
                       f'AlphaFold2 (OpenFold initial training), '
                       f'{cfg.blocks} Evoformer blocks, c_m {cfg.c_m}, '
                       f'c_z {cfg.c_z}, {cfg.extra_blocks} extra-MSA and '
                       f'{cfg.template_blocks} template blocks, structure '
                       f'module; {spec.crop} residues x {spec.msa_depth} '
                       f'clusters, {spec.extra_msa} extra sequences, '
                       f'{spec.templates} templates; FLOPs of one run, '
                       f'MFU adds a forward per recycle '
                       f'({spec.max_recycles / 2:g} on average)')


WORKLOAD = Workload(
    name='alphafold2', check='AlphaFold2', program='alphafold2',
    parser=parser, headline=Headline('samples_per_second'),
    model_info=build_model_info, optimizer='adam',
    benchmark='openfold',
    data="synthetic proteins (or a site's OpenFold data)",
    names_note='MLPerf HPC trains it with OpenFold, whose initial training '
               'the program ports',
    packages=('mlperf-logging',), precisions=precisions.PROGRAM)
