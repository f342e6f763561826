"""TemplateWorkload: a multilayer perceptron regressing synthetic data, the
suite's template of a workload (``src/template_workload``: what it trains
and prints). Its declaration: the names it goes by, its program and
parser, its sizes (the program's presets, read from the program's own
table), its FLOPs, its model builder, its settings.
"""
from hpctestlib_ml import flops, model_info, precisions, program_tables
from hpctestlib_ml import settings
from hpctestlib_ml.parsers import template_workload as parser
from hpctestlib_ml.registry import Headline, Workload

#: The program's ``--size`` presets: its own table
#: (``src/template_workload/sizes.py``, read from the file, no torch).
PROGRAM_SIZES = program_tables.load('template_workload', 'sizes').SIZES


def forward_flops(width, depth):
    '''Forward FLOPs of one sample: ``depth`` + 1 products of a row of
    ``width`` with a ``width`` x ``width`` matrix (2 FLOPs a multiply-add);
    the biases and GELUs add < 1 %.'''
    return (depth + 1) * 2 * width * width


def training_flops(width, depth):
    '''Training FLOPs of one sample: 3 forwards.'''
    return flops.training_flops(forward_flops(width, depth))


def build_model_info(size, device):
    '''The program's model at *size* (a preset), as it builds it.'''
    if size not in PROGRAM_SIZES:
        raise model_info.ModelInfoError(
            f'template_workload: unknown size {size!r}: use '
            f'{" or ".join(PROGRAM_SIZES)}')
    width, depth = (PROGRAM_SIZES[size][k] for k in ('width', 'depth'))
    program_tables.importable()
    import torch
    from template_workload.__main__ import build_model
    device = device or 'cpu'
    with model_info.built_on(device):
        model = build_model(width, depth, device)

    def inputs(dev):
        return (torch.zeros(1, width, device=dev),)

    return model_info.torch_info(
        'template_workload', size, f'mlp {width}x{depth}', model, inputs,
        forward_flops(width, depth), device,
        f'MLP of {depth} hidden layers of {width}, one sample')


WORKLOAD = Workload(
    name='template_workload', check='TemplateWorkload',
    program='template_workload', parser=parser,
    headline=Headline(parser.LOG.throughput),
    sizes={
        'tiny': {**PROGRAM_SIZES['tiny'], 'steps': 20, 'time_limit': '10m'},
        'benchmark': {**PROGRAM_SIZES['benchmark'], 'steps': 100,
                      'precision': 'bf16', 'time_limit': '20m'},
    },
    throughput_metric=parser.LOG.throughput,
    model_info=build_model_info, optimizer='adam',
    data='synthetic rows made on each device',
    precisions=precisions.PROGRAM,
    variables=settings.variables('template_workload', [
        ('width', 'int', None, "features of each layer; default: the "
         "size's", {'minimum': 1}),
        ('depth', 'int', None, "hidden layers; default: the size's",
         {'minimum': 0}),
    ]))
