"""python -m template_workload [options]: a multilayer perceptron trained
to regress synthetic data (package docstring: what it prints).

Each rank makes its data on its device before anything is timed: inputs
x of ``--width`` features and targets y = x A + noise, for a fixed random
A, so the loss has somewhere to go; it then steps Adam on the mean
squared error, ``--steps`` times, one batch of ``--batch-size`` rows per
step. Ranks: the launcher's env:// variables (``WORLD_SIZE`` > 1: DDP,
NCCL on GPUs, Gloo on CPUs); the device: ``torch_device.start_ranks``
(``--cpu``: the CPU). Precision: fp32, or fp16/bf16 autocast (fp16 with a
gradient scaler).
"""
import argparse
import sys
import time

import template_workload as program
from template_workload.sizes import SIZES


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--size', choices=list(SIZES), default='tiny',
                   help='defaults of --width, --depth and --batch-size')
    p.add_argument('--width', type=int, help='features of each layer')
    p.add_argument('--depth', type=int, help='hidden layers')
    p.add_argument('--batch-size', type=int, help='rows per rank and step')
    p.add_argument('--steps', type=int, default=20)
    p.add_argument('--precision', choices=('fp32', 'fp16', 'bf16'),
                   default='fp32')
    p.add_argument('--cpu', action='store_true', help='train on the CPU')
    p.add_argument('--seed', type=int, default=0)
    args = p.parse_args(argv)
    for key, value in SIZES[args.size].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.steps < 2:
        p.error('--steps must be 2 or more: the first step is warm-up')
    return args


def build_model(width, depth, device):
    '''``depth`` hidden layers of ``width`` features with GELU, then a
    linear output of ``width``.'''
    import torch
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    layers.append(torch.nn.Linear(width, width))
    return torch.nn.Sequential(*layers).to(device)


def synthetic_batch(batch, width, device, seed):
    '''(x, y) on *device*: y = x A + 0.01 noise, A the same on every rank.'''
    import torch
    generator = torch.Generator(device='cpu').manual_seed(seed)
    mixing = torch.randn(width, width, generator=generator) / width ** 0.5
    x = torch.randn(batch, width, generator=generator)
    y = x @ mixing + 0.01 * torch.randn(batch, width, generator=generator)
    return x.to(device), y.to(device)


def synchronize(device):
    import torch
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch

    import hpcml_log
    import torch_device
    rank, world, device = torch_device.start_ranks(
        cpu=args.cpu, bf16=args.precision == 'bf16')
    torch.manual_seed(args.seed)
    model = build_model(args.width, args.depth, device)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == 'cuda'
            else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(enabled=args.precision == 'fp16' and
                                  device.type == 'cuda')
    autocast = torch.autocast(
        device.type, dtype={'fp16': torch.float16,
                            'bf16': torch.bfloat16}.get(args.precision),
        enabled=args.precision != 'fp32')
    x, y = synthetic_batch(args.batch_size, args.width, device,
                           args.seed + rank)
    if rank == 0:
        print(program.start_line(world, args.batch_size, args.width,
                                 args.depth, args.precision, device.type),
              flush=True)
    begin, compute_s = None, 0.0
    for step in range(1, args.steps + 1):
        synchronize(device)
        started = time.time()
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        synchronize(device)
        ended = time.time()
        if step == 1:
            begin = ended             # the first step is warm-up
            torch_device.end_warmup(device)
        else:
            compute_s += ended - started
        if rank == 0:
            print(program.step_line(step, args.steps, loss.item(),
                                    ended - started,
                                    args.batch_size * world), flush=True)
    if rank == 0:
        hpcml_log.emit_timed_region(begin, time.time())
    hpcml_log.emit_timing(rank, args.steps - 1, 0.0, compute_s)
    torch_device.end_ranks(device, rank)
    return 0


if __name__ == '__main__':
    sys.exit(main())
