"""CosmoFlow (MLPerf HPC): a 3D CNN on 4 x 128^3 dark-matter cubes.

``src/cosmoflow`` is a PyTorch port of the MLPerf HPC v1.0 reference
(mlcommons/hpc ``cosmoflow``: 5 x [Conv3D k=3 + LeakyReLU + MaxPool],
FC 128 -> 64 -> 4, dropout 0.5; 8.9M parameters), ``reference`` size on GPU
partitions (per-GPU batch 4 as the reference config), ``tiny`` (4 x 32^3,
conv_size 8) on CPUs. Synthetic cubes by default; the reference data as
NumPy samples with ``-S data=DIR`` or the partition's
``extras['cosmoflow_data']``.
"""
from reframe.core.builtins import performance_function

from hpctestlib_ml import flops, model_info, precisions, program_tables
from hpctestlib_ml.parsers import mllog as parser
from hpctestlib_ml.workloads import Headline, Workload
from hpctestlib_ml.workloads.mlperf import MLLogTraining

#: (cube side, conv_size) of the program's sizes: its own table
#: (``src/cosmoflow/sizes.py``, read from the file, no torch).
SIZES = program_tables.load('cosmoflow', 'sizes').SIZES


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
    program = 'cosmoflow'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 4, 'steps': 20,
                 'time_limit': '15m'},
        'benchmark': {'model': 'reference', 'batch_size': 4, 'steps': 100,
                      'precision': precisions.benchmark('cosmoflow'),
                      'time_limit': '1h'},
    }

    data_extra = 'cosmoflow_data'

    def model_flops_per_sample(self):
        cube, conv_size = SIZES[self.model]
        return flops.training_flops(flops.cosmoflow_forward_flops(
            cube, conv_size))

    @performance_function('')
    def eval_mae(self):
        '''Mean absolute error of the four parameters on held-out batches
        (the reference's target: 0.124 after full training).'''
        return self.metric('eval_error')


def build_model_info(size, device):
    name = model_info.named_size(size, CosmoFlowTraining.sizes, 'model')
    model_info.programs_importable()
    import torch
    from cosmoflow.model import build_model
    cube, conv_size = SIZES[name]
    device = device or 'cpu'
    with model_info.built_on(device):
        model = build_model(cube, conv_size=conv_size)

    def inputs(dev):
        return (torch.zeros(1, 4, cube, cube, cube, device=dev),)

    return model_info.torch_info('cosmoflow', size, name, model, inputs,
                       flops.cosmoflow_forward_flops(cube, conv_size), device,
                       f'CosmoFlow 3D CNN, 4 x {cube}^3 cube, conv_size '
                       f'{conv_size}')


WORKLOAD = Workload(
    name='cosmoflow', check='CosmoFlow', program='cosmoflow', parser=parser,
    headline=Headline('samples_per_second'), model_info=build_model_info,
    optimizer='sgd_momentum',
    benchmark='cosmoflow',
    data="synthetic cubes (or a site's NumPy samples)",
    packages=('mlperf-logging',), precisions=precisions.PROGRAM)
