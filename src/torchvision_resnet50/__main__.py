"""python -m torchvision_resnet50 [options]: torchvision's ResNet-50 trained
on synthetic ImageNet-shaped data, as Horovod's and EESSI's
``pytorch_synthetic_benchmark.py`` trains it (package docstring).

Each rank builds ``torchvision.models.resnet50(weights=None)`` (ResNet
v1.5), makes one random batch of ``--batch-size`` images and labels on
its device before anything is timed, and steps SGD (lr 0.01, no momentum,
cross-entropy) on that batch over and over: ``--num-warmup-batches``
untimed, then ``--num-iters`` timed iterations of
``--num-batches-per-iter`` batches. Ranks: the launcher's env://
variables (``WORLD_SIZE`` > 1: DDP over NCCL on GPUs, Gloo on CPUs); the
device: ``torch_device.select_device_or_exit`` (``--no-cuda``: the CPU).

Rank 0 prints upstream's lines, so that EESSI's and CSCS's own patterns
read this log: ``Iter #i: X img/sec per GPU``, ``Img/sec per GPU: M +-C``
and ``Total img/sec on N GPU(s): N*M +-N*C`` (Horovod, EESSI), and per
iteration `` * Rank 0 - Epoch  i: X images/sec per GPU`` and at the end
`` * Total average: N*M images/sec`` (cnn_distr.py); ``--log-style`` keeps
one set (``CPU`` for ``GPU`` on CPUs). As upstream's, the figures are
rank 0's own timings (the ranks step together: DDP's all-reduce waits
for the slowest), the total N times them. Then ``[hpcml] timed region
START STOP`` (Unix seconds), and every rank its ``[hpcml] device``,
``timing``, ``rank_compute`` (its own forward time per step:
``rank_compute``) and (on GPUs) ``memory`` records (``hpcml_log``).

Where this differs from upstream, and why: each timed iteration ends by
waiting for the GPU (``torch.cuda.synchronize``), where Horovod's
``timeit`` stops the clock with work still queued; fp32 matrix products
run on TF32 as the suite's other programs (``torch_device.set_math_mode``;
upstream leaves PyTorch's default, TF32 for the convolutions only: the
difference is the 2048 x 1000 classifier); ``--fp16-allreduce``
compresses DDP's gradient buckets (``fp16_compress_hook``), as Horovod's
``Compression.fp16`` does its tensors (EESSI's DDP path ignores it).
cnn_distr.py's own figure also holds its DataLoader (images made by two
worker processes and copied to the GPU inside the timed epoch) at batch
512, work this program's figure leaves out: set ``--batch-size 512``
beside CSCS's reference, and read a gap as that work.
"""
import argparse
import gc
import os
import sys
import time

import torchvision_resnet50 as bench
from torchvision_resnet50.sizes import SIZES

NUM_CLASSES = 1000
LOG_STYLES = ('both', 'horovod', 'cscs')


def parse_args(argv):
    '''Horovod's arguments and defaults (``--size benchmark``), plus the
    suite's: ``--size``, ``--image-size``, ``--channels-last``,
    ``--log-style``, ``--seed``. EESSI's ``--use-ddp``, ``--world-size``
    and ``--master-*`` are the launcher's env:// variables here.'''
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--size', choices=list(SIZES), default='benchmark',
                   help='defaults of the next five options')
    p.add_argument('--model', default='resnet50',
                   help='torchvision model (upstream\'s --model)')
    p.add_argument('--batch-size', type=int, help='per rank')
    p.add_argument('--image-size', type=int)
    p.add_argument('--num-warmup-batches', type=int)
    p.add_argument('--num-batches-per-iter', type=int)
    p.add_argument('--num-iters', type=int)
    p.add_argument('--fp16-allreduce', action='store_true',
                   help='fp16 compression of the gradients\' all-reduce')
    p.add_argument('--use-amp', action='store_true',
                   help='autocast mixed precision (fp16 with loss scaling '
                        'on GPUs, bf16 on CPUs: torch.autocast\'s defaults)')
    p.add_argument('--channels-last', action='store_true',
                   help='NHWC images and weights (not in upstream)')
    p.add_argument('--no-cuda', action='store_true',
                   help='train on the CPU')
    p.add_argument('--log-style', choices=LOG_STYLES, default='both')
    p.add_argument('--seed', type=int, default=0)
    args = p.parse_args(argv)
    for key, value in SIZES[args.size].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def start_ranks(no_cuda):
    '''(rank, world size, device): the device as the suite's other
    programs choose it, the process group where WORLD_SIZE > 1, the math
    mode and the ``device`` record (``torch_device.start_ranks``).'''
    import torch_device
    return torch_device.start_ranks(cpu=no_cuda)


def build_model(name, device, channels_last):
    '''torchvision's *name* (``resnet50``: ResNet v1.5, 25,557,032
    parameters), randomly initialised, on *device*.'''
    import torch
    import torchvision
    model = torchvision.models.get_model(name, weights=None,
                                         num_classes=NUM_CLASSES)
    memory_format = (torch.channels_last if channels_last
                     else torch.contiguous_format)
    return model.to(device, memory_format=memory_format)


def synthetic_batch(batch_size, image_size, device, seed, channels_last):
    '''One batch of standard-normal images and uniform labels, made on
    *device* once, before the warm-up: Horovod's "fixed fake data"
    (``torch.randn`` images, ``random_() % 1000`` labels), which every
    step reuses, so that no timed step waits for the host.'''
    import torch
    generator = torch.Generator(device).manual_seed(seed)
    images = torch.randn(batch_size, 3, image_size, image_size,
                         device=device, generator=generator)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(NUM_CLASSES, (batch_size,), device=device,
                           generator=generator)
    return images, labels


def training_step(model, images, labels, device, use_amp):
    '''``step()``: Horovod's ``benchmark_step`` with EESSI's AMP: zero the
    gradients, forward under autocast, cross-entropy, scaled backward
    (DDP all-reduces the gradients), SGD step; then the step is closed for
    the rank's forward timing (:mod:`rank_compute`).'''
    import torch.nn.functional as F

    import rank_compute
    from mlperf_train import autocast, grad_scaler
    precision = amp_precision(device) if use_amp else 'fp32'
    optimizer = sgd(model)
    scaler = grad_scaler(device, precision)

    def step():
        optimizer.zero_grad()
        with autocast(device, precision):
            loss = F.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        rank_compute.step_done()
        return loss.detach()
    return step


def sgd(model):
    '''Horovod's optimizer under DDP (EESSI): plain SGD, lr 0.01.'''
    import torch
    return torch.optim.SGD(model.parameters(), lr=0.01)


def amp_precision(device):
    '''What ``torch.autocast(device_type)`` casts to by default, as
    EESSI's ``--use-amp`` leaves it: fp16 on GPUs, bf16 on CPUs.'''
    return 'fp16' if device.type == 'cuda' else 'bf16'


def synchronize(device):
    import torch
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(step, batches, device):
    '''(seconds for *batches* steps and their queued work, the last
    step's loss, still on the device); the garbage collector off
    meanwhile, as in ``timeit``, which Horovod times with.'''
    enabled = gc.isenabled()
    gc.disable()
    try:
        begin = time.perf_counter()
        for _ in range(batches):
            loss = step()
        synchronize(device)
        return time.perf_counter() - begin, loss
    finally:
        if enabled:
            gc.enable()


def wrap(model, device, world, fp16_allreduce):
    '''DDP where *world* > 1 (``mlperf_train.wrap_ddp``); with
    *fp16_allreduce*, its gradient buckets all-reduced in fp16.'''
    from mlperf_train import wrap_ddp
    model = wrap_ddp(model, device, world)
    if world > 1 and fp16_allreduce:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return model


def header(args, world, device):
    '''EESSI's and Horovod's opening lines, then the run's settings.'''
    unit = unit_of(device)
    precision = amp_precision(device) if args.use_amp else 'fp32'
    return [f'World size: {world}', f'Model: {args.model}',
            f'Batch size: {args.batch_size}',
            f'Number of {unit}s: {world}',
            f'Image size: {args.image_size}',
            f'Warm-up batches: {args.num_warmup_batches}',
            f'Batches per iteration: {args.num_batches_per_iter}',
            f'Iterations: {args.num_iters}',
            f'Precision: {precision}{" (amp)" if args.use_amp else ""}',
            f'Channels last: {"on" if args.channels_last else "off"}',
            f'Allreduce: {"fp16" if args.fp16_allreduce else "fp32"}']


def unit_of(device):
    '''Upstream's device word: ``GPU`` on a GPU, else ``CPU``.'''
    return 'GPU' if device.type == 'cuda' else 'CPU'


def benchmark(args, step, rank, device, say):
    '''The timed iterations: each one's images/s per rank, printed as it
    ends; returns (rates, Unix start, Unix stop, seconds).'''
    unit, rates, seconds = unit_of(device), [], []
    start = time.time()
    for index in range(args.num_iters):
        took, loss = timed(step, args.num_batches_per_iter, device)
        seconds.append(took)
        rates.append(bench.iteration_rate(
            args.batch_size, args.num_batches_per_iter, seconds[-1]))
        lines = []
        if args.log_style != 'cscs':
            lines.append(bench.iteration_line(index, rates[-1], unit))
        if args.log_style != 'horovod':
            lines.append(bench.cscs_epoch_line(rank, index, rates[-1], unit))
        # After the iteration's synchronize: reading the loss waits for
        # nothing.
        lines.append(bench.loss_line(index, float(loss)))
        say(*lines)
    return rates, start, time.time(), sum(seconds)


def report(args, rates, world, device, say):
    '''Upstream's closing lines for *rates*.'''
    mean, conf = bench.summary(rates)
    lines = []
    if args.log_style != 'cscs':
        lines += bench.result_lines(mean, conf, world, unit_of(device))
    if args.log_style != 'horovod':
        lines.append(bench.cscs_total_line(world * mean))
    say(*lines)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    import torch.distributed as dist

    import hpcml_log
    import rank_compute
    import torch_device
    rank, world, device = start_ranks(args.no_cuda)

    def say(*lines):
        '''Upstream's ``log``: rank 0 prints, the others stay quiet.'''
        if rank == 0 and lines:
            print('\n'.join(lines), flush=True)

    torch.manual_seed(args.seed)
    model = wrap(build_model(args.model, device, args.channels_last), device,
                 world, args.fp16_allreduce)
    images, labels = synthetic_batch(args.batch_size, args.image_size,
                                     device, args.seed + rank,
                                     args.channels_last)
    step = training_step(model, images, labels, device, args.use_amp)
    say(*header(args, world, device), 'Running warmup...')
    timed(step, args.num_warmup_batches, device)
    torch_device.end_warmup(device)
    rank_compute.discard()
    if world > 1:
        dist.barrier()
    say('Running benchmark...')
    rates, begin, end, seconds = benchmark(args, step, rank, device, say)
    report(args, rates, world, device, say)
    if rank == 0:
        hpcml_log.emit_timed_region(begin, end)
    hpcml_log.emit_timing(rank, args.num_iters * args.num_batches_per_iter,
                          0.0, seconds)
    rank_compute.emit(rank)
    torch_device.end_ranks(device, rank)
    return 0


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
