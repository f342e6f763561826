"""python -m collectives [options]: all-reduce, all-gather and
reduce-scatter through ``torch.distributed`` (NCCL, or RCCL behind the
same name, on GPUs; Gloo on CPUs), timed and printed as nccl-tests times
and prints them (the definitions and their sources: the package
docstring).

Every rank takes its device as the training programs do
(``torch_device.start_ranks``; ``--cpu``: the CPU and Gloo), allocates its
buffers once at the largest size (as nccl-tests does) and, for each
operation: ``--warmup-iters`` operations of every size, then per size one
untimed operation, a barrier, ``--iters`` operations back to back and the
device's queue drained; its time per operation is then averaged over the
ranks (nccl-tests' default ``-a 1``), and the slowest rank's time is kept
beside it (``# hpcml: ...``, below). After the timing each size is
checked once: every rank sends ``rank % 4 + 1``, and the elements off the expected
result (all ranks together) are the ``#wrong`` column.

Rank 0 prints nccl-tests' lines: ``# nThread 1 nGpus 1 minBytes ...
warmup iters: W iters: I ...``, ``# Using devices`` with one ``#  Rank``
line per rank, and per operation ``# Collective test starting:
<op>_perf``, the table (size, count, type, redop, root, time in us,
algbw, busbw in GB/s, #wrong; one placement group: all-reduce in place,
the others out of place, since ``torch.distributed`` has no other),
after each row a comment with its figures to 6 significant digits (the
table's 2 decimals leave tiny sizes' bandwidths at 0.00) and the slowest
rank's time (``# hpcml: time_us=... max_time_us=... algbw_GBps=...
busbw_GBps=...``), ``#
Out of bounds values``, ``# Avg bus bandwidth``, then ``[hpcml] timed
region START STOP``. Every rank prints its ``[hpcml] device`` (and, on
GPUs, ``memory``) record.
"""
import argparse
import os
import socket
import sys
import time

import collectives as coll

#: torch dtype name -> nccl-tests' type name (``-d``).
TYPE_NAMES = {'float32': 'float', 'float16': 'half', 'bfloat16': 'bfloat16'}

#: The suite's precision names -> torch dtype names.
DTYPES = {'fp32': 'float32', 'fp16': 'float16', 'bf16': 'bfloat16'}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('-b', '--minbytes', default='1K')
    p.add_argument('-e', '--maxbytes', default='1G')
    p.add_argument('-f', '--stepfactor', type=int, default=2)
    p.add_argument('-n', '--iters', type=int, default=20)
    p.add_argument('-w', '--warmup-iters', type=int, default=5)
    p.add_argument('--ops', default=','.join(coll.OPS),
                   help='comma-separated, of ' + ', '.join(coll.OPS))
    p.add_argument('--precision', choices=list(DTYPES), default='fp32',
                   help="the buffers' type (nccl-tests' -d: float)")
    p.add_argument('--cpu', action='store_true', help='Gloo on the CPU')
    args = p.parse_args(argv)
    args.ops = args.ops.split(',')
    unknown = [op for op in args.ops if op not in coll.OPS]
    if unknown:
        p.error(f'unknown operation(s) {unknown}: use {", ".join(coll.OPS)}')
    return args


def run_op(op, out, inp):
    '''One *op* from *inp* into *out* (all-reduce: in place, on *out*).'''
    import torch.distributed as dist
    if op == 'all_reduce':
        return dist.all_reduce(out)
    gather = getattr(dist, 'all_gather_single', None) or \
        dist.all_gather_into_tensor
    scatter = getattr(dist, 'reduce_scatter_single', None) or \
        dist.reduce_scatter_tensor
    return (gather if op == 'all_gather' else scatter)(out, inp)


def views(op, buffers, size, elt, world):
    '''(count, out, inp) of *size* bytes on the preallocated *buffers*.'''
    count, send, recv = coll.counts(op, size, elt, world)
    big_out, big_in = buffers
    return count, big_out[:recv], big_in[:send]


def sync(device):
    import torch
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_op(op, out, inp, iters, device):
    '''(mean over ranks, max over ranks) of one rank's seconds per
    operation: nccl-tests' ``BenchTime``.'''
    import torch
    import torch.distributed as dist
    run_op(op, out, inp)
    sync(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        run_op(op, out, inp)
    sync(device)
    took = torch.tensor([(time.perf_counter() - start) / iters],
                        dtype=torch.float64, device=device)
    slowest = took.clone()
    dist.all_reduce(took)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return took.item() / dist.get_world_size(), slowest.item()


def wrong_elements(op, out, inp, rank, world):
    '''Elements of one checked *op* off the expected result, summed over
    the ranks: every rank sends ``rank % 4 + 1`` (small integers, exact
    in every precision), compared in the buffers' own type (no copy of a
    1 GiB buffer in another).'''
    import torch
    import torch.distributed as dist
    inp.fill_(rank % 4 + 1)
    if op == 'all_reduce':
        out.fill_(rank % 4 + 1)
    run_op(op, out, inp)
    values = (torch.arange(world, device=out.device) % 4 + 1).to(out.dtype)
    if op == 'all_gather':
        got, expected = out.view(world, -1), values[:, None]
    else:
        got, expected = out, values.sum()
    wrong = (~torch.isclose(got, expected, rtol=1e-2)).sum().reshape(1)
    wrong = wrong.to(torch.float64)
    dist.all_reduce(wrong)
    return int(wrong.item())


def allocate(op, max_bytes, elt, world, dtype, device):
    '''(out, inp) buffers of *op* at the largest size.'''
    import torch
    _, send, recv = coll.counts(op, max_bytes, elt, world)
    return (torch.zeros(recv, dtype=dtype, device=device),
            torch.zeros(send, dtype=dtype, device=device))


def benchmark_op(op, args, rank, world, device, say):
    '''Warm-up, then every size of *op*: its table and summary lines.
    Each size timed and checked is a step of the rank's heartbeat, each
    size warmed a beat (:mod:`heartbeat`).'''
    import torch

    import heartbeat
    dtype = getattr(torch, DTYPES[args.precision])
    elt = torch.empty(0, dtype=dtype).element_size()
    type_name = TYPE_NAMES[DTYPES[args.precision]]
    redop = 'none' if op == 'all_gather' else 'sum'
    all_sizes = coll.sizes(coll.parse_size(args.minbytes),
                           coll.parse_size(args.maxbytes), args.stepfactor)
    buffers = allocate(op, all_sizes[-1], elt, world, dtype, device)
    for size in all_sizes:
        _, out, inp = views(op, buffers, size, elt, world)
        for _ in range(args.warmup_iters):
            run_op(op, out, inp)
        heartbeat.beat()
    sync(device)
    say(f'# Collective test starting: {op}_perf',
        *coll.header_lines(op, type_name))
    busbws, wrong_total = [], 0
    for size in all_sizes:
        count, out, inp = views(op, buffers, size, elt, world)
        whole = max(out.numel(), inp.numel()) * elt
        mean, slowest = time_op(op, out, inp, args.iters, device)
        algbw, busbw = coll.bandwidths(op, whole, mean, world)
        wrong = wrong_elements(op, out, inp, rank, world)
        heartbeat.step()
        busbws.append(busbw)
        wrong_total += wrong
        say(coll.result_line(whole, count, type_name, redop, mean, algbw,
                             busbw, wrong),
            coll.precise_line(mean, slowest, algbw, busbw))
    del buffers
    say(f'# Out of bounds values : {wrong_total} '
        f'{"FAILED" if wrong_total else "OK"}',
        f'# Avg bus bandwidth    : {sum(busbws) / len(busbws):g} ', '#')


def device_lines(rank, device):
    '''nccl-tests' ``#  Rank`` lines of every rank, gathered on rank 0.'''
    import torch
    import torch.distributed as dist
    index = device.index if device.type == 'cuda' else 0
    name = (torch.cuda.get_device_name(device) if device.type == 'cuda'
            else 'CPU')
    mine = (rank, os.getpid(), socket.gethostname(), index, name)
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    return ['#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s' % (
        r, pid, host, idx, 'cpu' if n == 'CPU' else 'gpu', n)
            for r, pid, host, idx, n in every]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch.distributed as dist

    import hpcml_log
    import torch_device
    rank, world, device = torch_device.start_ranks(cpu=args.cpu)

    def say(*lines):
        if rank == 0 and lines:
            print('\n'.join(lines), flush=True)

    if world == 1:            # no process group: make one of one rank
        dist.init_process_group(
            'nccl' if device.type == 'cuda' else 'gloo', rank=0,
            world_size=1, store=dist.HashStore())
    backend = dist.get_backend()
    say(f'# python -m collectives: torch.distributed {backend}, {world} '
        f'rank(s), nccl-tests\' output format',
        f'# nThread 1 nGpus 1 minBytes {coll.parse_size(args.minbytes)} '
        f'maxBytes {coll.parse_size(args.maxbytes)} step: '
        f'{args.stepfactor}(factor) warmup iters: {args.warmup_iters} '
        f'iters: {args.iters} agg iters: 1 validation: 1 graph: 0', '#',
        '# Using devices', *device_lines(rank, device), '#')
    begin = time.time()
    for op in args.ops:
        benchmark_op(op, args, rank, world, device, say)
    if rank == 0:
        hpcml_log.emit_timed_region(begin, time.time())
    torch_device.end_ranks(device, rank)
    return 0


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
