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
from hpctestlib_ml import flops, model_info, program_tables, settings
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.registry import PrecisionChoice
from hpctestlib_ml.registry.mlperf import mllog_workload, model_and_data

#: The program's sizes (crop, MSA, recycles, the model's config): its own
#: table (``src/alphafold2/sizes.py``, read from the file, no torch).
SIZES = program_tables.load('alphafold2', 'sizes').SIZES

#: What the benchmark size trains in, and the reference.
PRECISION = PrecisionChoice(
    'bf16', 'fp32',
    'MLPerf HPC v3.0 closed OpenFold: NVIDIA (eos) and HPE+LBNL '
    '(perlmutter) log precision "bf16", TACC and Clemson "tf32"; the '
    'reference (mlcommons/hpc openfold/train.py) defaults to tf32 and '
    'raises NotImplementedError for bf16/fp16/amp')

#: Forward FLOPs of one run of the suite's AlphaFold2 (``src/alphafold2``:
#: OpenFold's initial-training model: embedders, templates, extra-MSA
#: stack, Evoformer, structure module, heads) on one crop, no recycling,
#: by size: measured once with torch.utils.flop_counter.FlopCounterMode
#: (torch 2.14.1; the reference size on the ``meta`` device, which counts
#: without computing). Matmuls and attention only; the same counter over
#: forward + backward gives 2.99x, so a trained run is taken as 3x.
#: Reference (256 residues, 124 clusters, 1024 extra sequences, 4
#: templates): 11.8 TFLOP a run.
FORWARD_FLOPS = {
    'tiny': 8.448840832e9,          # 64 residues x 32, 64 extra, 2 templ.
    'reference': 11.810919240192e12,
}


def mean_recycles(size):
    '''Recycles per training sample of AlphaFold2 *size*: uniform over 0
    to the size's maximum (AlphaFold2 1.10), so on average half of it;
    each is a forward without gradients. The maximum is the program's own
    (``src/alphafold2/sizes.py``), not a copy of it.'''
    return SIZES[size].max_recycles / 2


def training_flops(size):
    '''Model FLOPs of one AlphaFold2 training sample of *size*: the
    trained run (3 forwards) and the mean number of recycling runs (one
    forward each); block recomputation not counted (MFU, not HFU).
    Reference: 4.5 x 11.8 = 53.1 TFLOP.'''
    forward = FORWARD_FLOPS[size]
    return flops.training_flops(forward) + mean_recycles(size) * forward


def build_model_info(size, device):
    name = model_info.named_size(size, WORKLOAD.sizes, 'model')
    program_tables.importable()
    import torch
    from alphafold2 import proteins
    spec = SIZES[name]
    device = device or ('cpu' if name == 'tiny' else 'meta')
    with model_info.built_on(device):
        model = proteins.build_model(spec)
    features, _ = next(proteins.synthetic_proteins(
        1, spec, torch.Generator().manual_seed(0)))

    def inputs(dev):
        # One run through the network: no recycling (the FLOPs per
        # sample add the recycles' forwards, training_flops).
        return tuple(t.to(dev) for t in features) + (0,)

    cfg = model.cfg
    return model_info.torch_info(
        'alphafold2', size, name, model, inputs, FORWARD_FLOPS[name], device,
        f'AlphaFold2 (OpenFold initial training), {cfg.blocks} Evoformer '
        f'blocks, c_m {cfg.c_m}, c_z {cfg.c_z}, {cfg.extra_blocks} '
        f'extra-MSA and {cfg.template_blocks} template blocks, structure '
        f'module; {spec.crop} residues x {spec.msa_depth} clusters, '
        f'{spec.extra_msa} extra sequences, {spec.templates} templates; '
        f'FLOPs of one run, MFU adds a forward per recycle '
        f'({spec.max_recycles / 2:g} on average)')


#: The count published for the model at benchmark size: OpenFold's
#: initial-training model, as MLPerf HPC OpenFold submissions log it
#: (``model_parameters_count``).
PUBLISHED = {'benchmark': (Published(
    93_229_082, "OpenFold's initial-training AlphaFold2 (MLPerf HPC "
    "OpenFold), its logged model_parameters_count",
    'https://github.com/mlcommons/hpc_results_v3.0/blob/main/NVIDIA/results/'
    'eos_n260_ngc23.09_pytorch/strong/openfold/result_0.txt'),)}


WORKLOAD = mllog_workload(
    name='alphafold2', check='AlphaFold2', program='alphafold2',
    sizes={
        'tiny': {'model': 'tiny', 'batch_size': 1, 'steps': 20,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 1, 'steps': 50,
                      'precision': PRECISION.benchmark, 'time_limit': '1h'},
    },
    precision_choice=PRECISION, model_info=build_model_info,
    published=PUBLISHED,
    optimizer='adam', benchmark='openfold',
    # MLPerf HPC 3.0.0's rules.
    mlperf_rules=('hpc', '3.0.0'),
    data="synthetic proteins (or a site's OpenFold data)",
    names_note='MLPerf HPC trains it with OpenFold, whose initial training '
               'the program ports',
    variables=model_and_data('alphafold2', 'alphafold2', 'sizes', 'SIZES'),
    extras=settings.extras_keys('alphafold2', [
        ('openfold_data', 'path', None, 'a directory of OpenFold samples',
         {'allowed': 'a directory'}),
    ]))
