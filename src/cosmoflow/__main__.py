"""python -m cosmoflow [options]: CosmoFlow training, MLPerf-style logs.

Sizes: ``reference`` (4 x 128^3 cubes, conv_size 32, the MLPerf HPC v1.0
model) and ``tiny`` (4 x 32^3, conv_size 8). Data: synthetic cubes by
default (log(1 + Poisson counts), targets uniform in [-1, 1]); or
``--data DIR`` of ``*.npy`` sample files, each a (cube, cube, cube, 4)
array, with ``*.target.npy`` beside (the reference's NumPy format). SGD with
momentum 0.9, learning rate 0.001 x global batch / 64 (the reference's
linear scaling), MSE loss; rank 0 logs :::MLLOG events and, at the end,
``eval_error`` (mean absolute error on held-out batches).
"""
import pathlib
import sys

import numpy as np
import torch

from mlperf_train import argument_parser, run_main

SIZES = {'tiny': (32, 8), 'reference': (128, 32)}


def parse_args(argv):
    return argument_parser(__doc__, SIZES, batch_size=4).parse_args(argv)


def synthetic(batch, cube, generator):
    while True:
        counts = torch.poisson(torch.full((batch, 4, cube, cube, cube), 2.0),
                               generator=generator)
        yield torch.log1p(counts), torch.rand(batch, 4,
                                              generator=generator) * 2 - 1


def from_files(directory, batch, cube, rank, world, generator):
    files = sorted(p for p in pathlib.Path(directory).glob('*.npy')
                   if not p.name.endswith('.target.npy'))[rank::world]
    if not files:
        sys.exit(f'cosmoflow: error: no *.npy samples in {directory} for '
                 f'rank {rank}')
    while True:
        pick = torch.randint(len(files), (batch,), generator=generator)
        cubes, targets = [], []
        for i in pick.tolist():
            x = np.load(files[i])
            if x.shape != (cube, cube, cube, 4):
                sys.exit(f'cosmoflow: error: {files[i]} has shape {x.shape},'
                         f' expected {(cube, cube, cube, 4)}')
            cubes.append(np.log1p(x).transpose(3, 0, 1, 2))
            targets.append(np.load(files[i].with_suffix('.target.npy')))
        yield (torch.tensor(np.stack(cubes), dtype=torch.float32),
               torch.tensor(np.stack(targets), dtype=torch.float32))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from cosmoflow.model import build_model
    from mlperf_train import (evaluate, finish, log_setup, run_steps,
                              start, supervised_step, wrap_ddp)

    rank, world, device, log = start('cosmoflow', args.seed)
    mlc = log.constants
    cube, conv_size = SIZES[args.size]
    model = build_model(cube, conv_size=conv_size).to(device)
    params = sum(p.numel() for p in model.parameters())
    model = wrap_ddp(model, device, world)
    global_batch = args.batch_size * world
    lr = 0.001 * global_batch / 64
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    generator = torch.Generator().manual_seed(args.seed + rank)
    batches = (synthetic(args.batch_size, cube, generator)
               if args.data == 'synthetic' else
               from_files(args.data, args.batch_size, cube, rank, world,
                          generator))
    log_setup(log, ((mlc.GLOBAL_BATCH_SIZE, global_batch),
                    (mlc.OPT_NAME, 'sgd'), (mlc.OPT_BASE_LR, lr),
                    ('model_parameters', params), ('world_size', world),
                    ('sample_shape', [4, cube, cube, cube])))
    log.end(mlc.INIT_STOP)

    model.train()
    step = supervised_step(model, batches, torch.nn.MSELoss(), optimizer,
                           device, args.precision)
    status = run_steps(log, step, args.steps, global_batch, device, world)
    log.event('eval_error', evaluate(
        model, batches, args.eval_batches,
        lambda out, y: (out - y).abs().mean(), device, world))
    finish(world)
    return 0 if status == 'success' else 1


if __name__ == '__main__':
    run_main(main)
