"""python -m sdc [options]: every rank computes the same matrix products
and training step from the same seed, deterministically, digests each
result, and the ranks compare their digests: the ``SilentDataCorruption``
component check (what is computed and why: the package docstring).

Each rank takes its device as the training programs do
(``torch_device.start_ranks``: the local rank's GPU, or the CPU with
``--cpu``, on ``--threads`` threads), makes the computation deterministic
(``sdc.make_deterministic``) and computes, ``--repetitions`` times, in each
of ``--precisions`` (default: the device's, as ``MatmulRate``'s):
``--products`` products of ``--matrix-size`` square matrices, then one
training step of a perceptron ``--width`` wide on a batch of ``--batch``.
After each result the ranks gather its digest; where they differ, the
ranks that ``sdc.exchange_plan`` pairs send their result, and the receiver
measures its own against it (``sdc.difference``).

Every rank prints, per repetition, one record in one write::

    [hpcml] answer {"digests": {"matmul fp32 #1": "3f0c...", ...}, "isa": "AVX2", "node": "n1", "rank": 0, "repetition": 1, "seconds": 0.031, "threads": 1, "version": 1}

``digests``: item -> the first 16 hex digits of the SHA-256 of its bytes;
``node``: the host name; ``threads``: torch's CPU threads; ``isa``: the
CPU instructions torch's kernels use (``torch.backends.cpu.
get_cpu_capability``; None on a GPU, where the host's CPU does not
compute); ``seconds``: the repetition's, computation, digests and
comparisons; ``version``: ``sdc.VERSION``. A rank that measured its result
against another's prints::

    [hpcml] answer_error {"against": 0, "differ": 1, "elements": 65536, "item": "matmul fp32 #2", "max_rel_error": 0.000122, "rank": 1, "repetition": 1}

Rank 0 opens with the settings (``sdc: ...``); every rank prints its
``[hpcml] device`` record, rank 0 ``[hpcml] timed region START STOP`` and,
on GPUs, every rank its ``memory`` record. Read by
``hpctestlib_ml/parsers/sdc.py``; compared by ``hpctestlib_ml/answers.py``.
"""
import argparse
import os
import socket
import sys
import time

import sdc


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--matrix-size', type=int, default=8192, dest='n',
                   help='side of the square matrices (default 8192)')
    p.add_argument('--products', type=int, default=3,
                   help='matrix products per precision (default 3)')
    p.add_argument('--width', type=int, default=2048,
                   help="the model's width (default 2048)")
    p.add_argument('--batch', type=int, default=512,
                   help='samples of its training step (default 512)')
    p.add_argument('--precisions',
                   help='comma-separated, of ' + ', '.join(sdc.PRECISIONS) +
                        " (default: the device's)")
    p.add_argument('--repetitions', type=int, default=2,
                   help='times every rank computes it all (default 2)')
    p.add_argument('--threads', type=int,
                   help="torch's CPU threads (default: torch's own)")
    p.add_argument('--cpu', action='store_true', help='compute on the CPU')
    args = p.parse_args(argv)
    for option in ('matrix-size', 'products', 'width', 'batch',
                   'repetitions', 'threads'):
        value = getattr(args, 'n' if option == 'matrix-size' else option)
        if value is not None and value < 1:
            p.error(f'--{option} must be at least 1, got {value}')
    return args


def items(args, precision, device):
    '''``(item, result)`` of everything computed in *precision*.'''
    yield from sdc.products(args.n, precision, args.products, device)
    yield from sdc.training_step(precision, args.width, args.batch, device)


def compare(rank, world, item, result, mine, repetition):
    '''Gather the ranks' digests of *item*; where they differ, send or
    receive results as ``sdc.exchange_plan`` says, and print the
    receiver's measure of its own result against the sender's.'''
    import torch
    import torch.distributed as dist

    import hpcml_log
    every = [None] * world
    dist.all_gather_object(every, mine)
    for sender, receiver in sdc.exchange_plan(every):
        if rank == sender:
            dist.send(result, receiver)
        elif rank == receiver:
            theirs = torch.empty_like(result)
            dist.recv(theirs, sender)
            differ, elements, worst = sdc.difference(result, theirs)
            hpcml_log.emit('answer_error', rank=rank, repetition=repetition,
                           item=item, against=sender, differ=differ,
                           elements=elements,
                           max_rel_error=float(f'{worst:.6g}'))


def repetition_record(args, rank, world, device, precisions, repetition):
    '''Compute everything once, comparing each result with the other
    ranks'; the ``answer`` record's fields.'''
    import torch

    import matmul_rate
    start = time.perf_counter()
    digests = {}
    for precision in precisions:
        for item, result in items(args, precision, device):
            digests[item] = sdc.digest(result)
            if world > 1:
                compare(rank, world, item, result, digests[item],
                        repetition)
            del result
    matmul_rate.synchronize(device)
    return {'rank': rank, 'repetition': repetition,
            'node': socket.gethostname(), 'threads': torch.get_num_threads(),
            'isa': (torch.backends.cpu.get_cpu_capability()
                    if device.type == 'cpu' else None),
            'version': sdc.VERSION,
            'seconds': round(time.perf_counter() - start, 6),
            'digests': digests}


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    import torch.distributed as dist

    import hpcml_log
    import matmul_rate
    import torch_device
    sdc.make_deterministic(os.environ)
    if args.threads:
        torch.set_num_threads(args.threads)
    rank, world, device = torch_device.start_ranks(cpu=args.cpu,
                                                   math_mode=False)
    try:
        precisions = matmul_rate.chosen(args.precisions, device.type)
    except ValueError as err:
        sys.exit(f'sdc: error: {err}')
    if rank == 0:
        print(f'sdc: {world} rank(s), {device.type}, n {args.n}, '
              f'{args.products} products and a training step (width '
              f'{args.width}, batch {args.batch}) in '
              f'{" ".join(precisions)}, {args.repetitions} repetitions, '
              f'{torch.get_num_threads()} thread(s) per rank', flush=True)
    begin = time.time()
    for repetition in range(1, args.repetitions + 1):
        hpcml_log.emit('answer', **repetition_record(
            args, rank, world, device, precisions, repetition))
    if world > 1:
        dist.barrier()
    if rank == 0:
        hpcml_log.emit_timed_region(begin, time.time())
    torch_device.end_ranks(device, rank)
    return 0


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
