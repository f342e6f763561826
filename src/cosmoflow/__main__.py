"""python -m cosmoflow [options]: CosmoFlow training, MLPerf-style logs.

Sizes: ``reference`` (4 x 128^3 cubes, conv_size 32, the MLPerf HPC v1.0
model) and ``tiny`` (4 x 32^3, conv_size 8). Data: synthetic cubes by
default (log(1 + Poisson counts), targets uniform in [-1, 1]); or
``--data DIR`` of ``*.npy`` sample files, each a (cube, cube, cube, 4)
array, with ``*.target.npy`` beside (the reference's NumPy format).

Training as the reference's ``configs/cosmo.yaml`` (mlcommons/hpc
cosmoflow): SGD with momentum 0.9, no weight decay, dropout 0.5, MSE loss;
the learning rate scaled linearly with the batch (0.001 x global batch /
64), reached by a linear warm-up from 0.001 over 4 epochs and decayed x0.25
at epoch 32 and x0.125 at epoch 64. An epoch is the training set once:
the dataset's files, or, for synthetic data, the samples this run
generates. Rank 0 logs :::MLLOG events and, at the end, ``eval_error``
(mean absolute error on held-out batches; the reference's target: 0.124).
"""
import pathlib
import sys

import numpy as np
import torch

from cosmoflow.model import build_model
from cosmoflow.sizes import SIZES
import input_paths
from mlperf_train import argument_parser, run_main

#: The reference's schedule (configs/cosmo.yaml ``lr_schedule``).
BASE_LR, BASE_BATCH = 0.001, 64
WARMUP_EPOCHS = 4
DECAY = {32: 0.25, 64: 0.125}
DROPOUT = 0.5


#: ``--layout``: the memory format of the cubes and the convolutions'
#: weights and activations. The tensors' logical order stays (N, C, D, H,
#: W) either way (the weights, the Flatten before the first Dense and
#: the results are those of the channels-first model), only the order in
#: memory changes: ``channels_last`` stores (N, D, H, W, C), the
#: reference's NDHWC.
LAYOUTS = {'channels_first': torch.contiguous_format,
           'channels_last': torch.channels_last_3d}

#: The default ``--layout`` per device type, and why.
DEFAULT_LAYOUT = {
    'cpu': ('channels_last', 'oneDNN runs these 3-D convolutions and '
            'their gradients faster on NDHWC than on NCDHW '
            '(bench/cosmoflow_step.py)'),
    'cuda': ('channels_last', 'cuDNN\'s tensor-core 3-D convolutions take '
             'NDHWC; NCDHW adds transposes around every convolution with '
             'bf16/fp16 (the MLPerf HPC GPU submissions run CosmoFlow '
             'NDHWC)'),
}


def parse_args(argv):
    p = argument_parser(__doc__, SIZES, batch_size=4)
    p.add_argument('--layout', choices=list(LAYOUTS),
                   help='memory format of the activations and weights '
                   '(default per device: channels_last on CPUs and GPUs; '
                   'the log\'s "layout" event says which ran and why)')
    return p.parse_args(argv)


def default_layout(device):
    '''(layout, reason): the ``--layout`` a run on *device* takes when
    none is given (:data:`DEFAULT_LAYOUT`; devices not named there take
    the CPU's).'''
    return DEFAULT_LAYOUT.get(device.type, DEFAULT_LAYOUT['cpu'])


def new_model(size, device, layout, dropout=DROPOUT):
    '''The *size*'s network on *device*, its weights in *layout*.'''
    cube, conv_size = SIZES[size]
    return build_model(cube, conv_size=conv_size, dropout=dropout).to(
        device, memory_format=LAYOUTS[layout])


def new_optimizer(model, global_batch):
    '''The reference's SGD (momentum 0.9, no weight decay) at the peak
    rate for *global_batch* (linear scaling from 0.001 at batch 64).'''
    return torch.optim.SGD(model.parameters(),
                           lr=BASE_LR * global_batch / BASE_BATCH,
                           momentum=0.9, weight_decay=0.0)


def loss_function():
    '''The reference's training loss (configs/cosmo.yaml ``loss: mse``).'''
    return torch.nn.MSELoss()


def in_layout(source, layout):
    '''*source*'s (cubes, targets) batches, the cubes in *layout*'s memory
    format (no copy where they already are).'''
    memory_format = LAYOUTS[layout]
    for cubes, targets in source:
        yield cubes.contiguous(memory_format=memory_format), targets


def synthetic(batch, cube, generator):
    while True:
        counts = torch.poisson(torch.full((batch, 4, cube, cube, cube), 2.0),
                               generator=generator)
        yield torch.log1p(counts), torch.rand(batch, 4,
                                              generator=generator) * 2 - 1


def sample_files(directory, rank, world):
    '''(this rank's sample files, how many the directory holds).'''
    files = sorted(p for p in pathlib.Path(directory).glob('*.npy')
                   if not p.name.endswith('.target.npy'))
    if not files[rank::world]:
        sys.exit(f'cosmoflow: error: no *.npy samples in {directory} for '
                 f'rank {rank}')
    return files[rank::world], len(files)


def from_files(files, batch, cube, generator):
    while True:
        pick = torch.randint(len(files), (batch,), generator=generator)
        cubes, targets = [], []
        for i in pick.tolist():
            x = np.load(files[i])
            if x.shape != (cube, cube, cube, 4):
                sys.exit(f'cosmoflow: error: {files[i]} has shape {x.shape},'
                         f' expected {(cube, cube, cube, 4)}')
            cubes.append(np.log1p(x, dtype=np.float32))
            targets.append(np.load(files[i].with_suffix('.target.npy')))
        # The files' (D, H, W, C) order, viewed as (N, C, D, H, W):
        # channels-last in memory without a copy.
        yield (torch.from_numpy(np.stack(cubes)).permute(0, 4, 1, 2, 3),
               torch.tensor(np.stack(targets), dtype=torch.float32))


def lr_factor(scale, steps_per_epoch):
    '''The rate over the step, as a fraction of the scaled peak rate:
    warm-up from 1/scale of it, then the decays.'''
    def factor(step):
        epoch = step / steps_per_epoch
        if epoch < WARMUP_EPOCHS:
            return (1 + (scale - 1) * epoch / WARMUP_EPOCHS) / scale
        value = 1.0
        for boundary, decay in DECAY.items():
            if epoch >= boundary:
                value = decay
        return value
    return factor


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    input_paths.require_data('cosmoflow', args.data)
    from mlperf_train import (Batches, evaluate, log_evaluation, log_setup,
                              start, stop, supervised_step, train, wrap_ddp)

    rank, world, device, log = start(
        'cosmoflow', args, 'closed' if args.size == 'reference' else 'open')
    mlc = log.constants
    cube = SIZES[args.size][0]
    layout, why = ((args.layout, 'chosen with --layout') if args.layout
                   else default_layout(device))
    model = new_model(args.size, device, layout)
    params = sum(p.numel() for p in model.parameters())
    model = wrap_ddp(model, device, world)
    global_batch = args.batch_size * world
    scale = global_batch / BASE_BATCH
    optimizer = new_optimizer(model, global_batch)
    generator = torch.Generator().manual_seed(args.seed + rank)
    if args.data == 'synthetic':
        source = synthetic(args.batch_size, cube, generator)
        train_samples = args.steps * global_batch
    else:
        files, train_samples = sample_files(args.data, rank, world)
        source = from_files(files, args.batch_size, cube, generator)
    source = in_layout(source, layout)
    batches = Batches(source, device, args.steps,
                      pooled=args.data == 'synthetic')
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(
        scale, max(1, train_samples // global_batch)))
    log_setup(log, ((mlc.GLOBAL_BATCH_SIZE, global_batch),
                    (mlc.OPT_NAME, 'sgd'), (mlc.OPT_BASE_LR, BASE_LR * scale),
                    ('opt_momentum', 0.9),
                    (mlc.OPT_LR_WARMUP_EPOCHS, WARMUP_EPOCHS),
                    (mlc.OPT_LR_WARMUP_FACTOR, scale),
                    (mlc.OPT_LR_DECAY_BOUNDARY_EPOCHS, list(DECAY)),
                    (mlc.OPT_LR_DECAY_FACTOR, list(DECAY.values())),
                    ('dropout', DROPOUT), (mlc.OPT_WEIGHT_DECAY, 0.0),
                    (mlc.TRAIN_SAMPLES, train_samples),
                    (mlc.EVAL_SAMPLES, args.eval_batches * global_batch),
                    ('model_parameters', params),
                    ('sample_shape', [4, cube, cube, cube])))
    log.event('layout', layout, reason=why)
    log.end(mlc.INIT_STOP)

    model.train()
    step = supervised_step(model, batches, loss_function(), optimizer,
                           device, args.precision, scheduler=scheduler)
    status = train(log, step, args.steps, global_batch, device, world,
                   batches=batches)
    log_evaluation(log, 'eval_error', lambda: evaluate(
        model, source, args.eval_batches,
        lambda out, y: (out - y).abs().mean(), device, world))
    return stop(log, status, world)


if __name__ == '__main__':
    run_main(main)
