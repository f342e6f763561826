"""python -m matmul_rate [options]: each rank's achievable matrix-multiply
rate per precision on its device, what ``hpcml cpu-peak`` measures for a
CPU, for GPUs too (the ``MatmulRate`` component check).

Each rank takes its device as the training programs do
(``torch_device.start_ranks``: the local rank's GPU, or the CPU with
``--cpu``), and for each of ``--precisions`` (default: bf16, fp16, tf32,
fp32 on a GPU, fp32 on a CPU) makes two random ``--matrix-size`` square
matrices, runs ``--warmup`` untimed products (and more, in batches twice
as long each, until the warm-up has lasted ``--warmup-seconds``), then
``--iterations`` timed iterations of ``--products`` products each, or as
many more as the warm-up's last batch says make the timed iterations last
``--measure-seconds`` together (``matmul_rate``: the queue drained before
each clock read, ``2 n^3`` FLOPs a product; the line says how many ran).
The ranks agree on that count (the largest rank's), and
start each precision together (a barrier), so that every device of a
node computes at once, as in training, sharing its power and cooling.

Each rank prints one line per precision, in one write::

    [matmul_rate] rank 0 precision bf16 n 8192 iterations 10 products 10 tflops 712.31 min 705.20 max 715.02 tf32 False

``tflops`` (6 significant digits): the precision's FLOPs over all timed iterations' seconds
(TFLOP/s, 1e12); ``min``/``max``: its slowest and fastest iteration;
``tf32``: whether fp32 products ran on TF32 (torch's flag and
``NVIDIA_TF32_OVERRIDE``, as the ``device`` record judges it). Rank 0
opens with the settings (``matmul_rate: ...``); every rank then prints its
``[hpcml] device`` record, ``[hpcml] timed region START STOP`` (rank 0)
and, on GPUs, its ``memory`` record. Read by
``hpctestlib_ml/parsers/matmul_rate.py``.
"""
import argparse
import sys
import time

import matmul_rate


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--matrix-size', type=int, default=8192, dest='n',
                   help='side of the square matrices (default 8192, the '
                        'GPU probes\')')
    p.add_argument('--iterations', type=int, default=10,
                   help='timed iterations per precision')
    p.add_argument('--products', type=int, default=10,
                   help='products per timed iteration')
    p.add_argument('--warmup', type=int, default=3,
                   help='untimed products before the timed ones')
    p.add_argument('--warmup-seconds', type=float, default=0.0,
                   help='untimed products for at least this long (default '
                        '0: --warmup only)')
    p.add_argument('--measure-seconds', type=float, default=0.0,
                   help='more products per iteration, where needed, for '
                        'the timed iterations to last this long together '
                        '(default 0: --products)')
    p.add_argument('--precisions',
                   help='comma-separated, of ' + ', '.join(
                       matmul_rate.PRECISIONS) + ' (default: bf16,fp16,'
                       'tf32,fp32 on a GPU, fp32 on a CPU)')
    p.add_argument('--cpu', action='store_true', help='measure the CPU')
    return p.parse_args(argv)


def precisions_of(args, device):
    '''The precisions to measure: ``--precisions``, else the device's.'''
    try:
        return matmul_rate.chosen(args.precisions, device.type)
    except ValueError as err:
        sys.exit(f'matmul_rate: error: {err}')


def agreed(count, world, device):
    '''The largest of the ranks' *count*: every rank times as many
    products, so that the node's devices compute together throughout.'''
    if world == 1:
        return count
    import torch
    import torch.distributed as dist
    value = torch.tensor([count], dtype=torch.int64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return int(value.item())


def measure(args, precision, device, world=1):
    '''(TFLOP/s over all timed iterations, slowest, fastest iteration's)
    of *precision* on *device*, whether TF32 ran, and the products per
    iteration.'''
    import torch_device
    a, b, out = matmul_rate.operands(args.n, precision, device)
    tf32 = torch_device.tf32_active(device)
    per_product = matmul_rate.warm_up(a, b, out, args.warmup,
                                      args.warmup_seconds)
    products = agreed(matmul_rate.products_per_iteration(
        per_product, args.iterations, args.measure_seconds, args.products),
        world, device)
    flops = matmul_rate.product_flops(args.n) * products
    took = [matmul_rate.seconds(a, b, out, products)
            for _ in range(args.iterations)]
    del a, b, out
    rates = [flops / t / 1e12 for t in took]
    return (flops * len(took) / sum(took) / 1e12, min(rates), max(rates),
            tf32, products)


def rate_line(rank, precision, args, tflops, slowest, fastest, tf32,
              products):
    return (f'[matmul_rate] rank {rank} precision {precision} n {args.n} '
            f'iterations {args.iterations} products {products} '
            f'tflops {tflops:.6g} min {slowest:.6g} max {fastest:.6g} '
            f'tf32 {tf32}')


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch.distributed as dist

    import hpcml_log
    import torch_device
    rank, world, device = torch_device.start_ranks(cpu=args.cpu,
                                                   math_mode=False)
    precisions = precisions_of(args, device)
    if rank == 0:
        print(f'matmul_rate: {world} rank(s), {device.type}, n {args.n}, '
              f'precisions {" ".join(precisions)}, {args.iterations} timed '
              f'iterations of {args.products} products (or more, for '
              f'{args.measure_seconds:g} s) after {args.warmup} warm-up '
              f'(or more, for {args.warmup_seconds:g} s)', flush=True)
    begin = time.time()
    for precision in precisions:
        if world > 1:
            dist.barrier()
        line = rate_line(rank, precision, args,
                         *measure(args, precision, device, world))
        sys.stdout.write(line + '\n')
        sys.stdout.flush()
    if world > 1:
        dist.barrier()
    if rank == 0:
        hpcml_log.emit_timed_region(begin, time.time())
    torch_device.end_ranks(device, rank)
    return 0


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
