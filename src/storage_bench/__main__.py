"""python -m storage_bench --dir DIR [options]: the storage a training job
reads its data from and writes its checkpoints to, measured as the jobs
use it, on every rank at once (the ``Storage`` component check).

In a directory of its own under ``--dir`` (the partition's parallel or
node-local file system), every rank writes its share of each data format
(``storage_bench``: CosmoFlow's ``.npy``, DeepCAM's ``.npz``, ImageNet's
TFRecord shards, WikiText's text; ``--bytes-per-rank`` of each, samples of
``--size``), flushed to storage. Then, for ``--rounds`` rounds:

- each format: the page cache dropped, a barrier, and every rank reads the
  files of one writer (a rank of the next node; its own on one node) as
  the workload's program reads them;
- the checkpoint: every rank writes its shard of ``--checkpoint-bytes``
  (float32 tensors of up to 64 MiB in a dict, ``torch.save`` then
  ``fsync``: a checkpoint counts once it is on storage), as Megatron's
  distributed optimizer and ``torch.distributed.checkpoint`` shard the
  state over the ranks (a DDP program's rank 0 writes all of it: this
  measures the parallel file system's aggregate rate instead); the page
  cache dropped, a barrier, and every rank ``torch.load``\\ s the writer's
  shard to the CPU, as a restart does.

Each rank prints one line per operation and round, in one write::

    [storage_bench] rank 0 round 0 op read_npy bytes 1073741824 seconds 0.5123 files 128 writer 4 cache fadvise

(``cache``: ``fadvise`` where the page cache was dropped before a read,
``none`` where the system cannot; ``fsync`` for a write, timed until it
was on storage). Rank 0 opens with the settings and ends with
``[hpcml] timed region START STOP``; every rank prints its ``[hpcml]
device`` record (and on GPUs ``memory``: nothing held). The ranks'
collectives are barriers, over Gloo on every device: no rank creates a
CUDA context or sets NCCL up (``torch_device.start_ranks(computes=
False)``). The directory is removed at the end. Read by ``hpctestlib_ml/parsers/storage_bench.py``: a round's
aggregate rate is its bytes over the slowest rank's seconds.
"""
import argparse
import os
import shutil
import sys
import time

import numpy as np

import storage_bench as sb

#: A checkpoint tensor's largest size (a large layer's weight).
CHUNK_BYTES = 64 * 2 ** 20


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--dir', required=True,
                   help='where to write (a directory of its own is made)')
    p.add_argument('--size', choices=list(sb.SAMPLES), default='benchmark',
                   help='the samples\' shapes')
    p.add_argument('--formats', default=','.join(sb.FORMATS))
    p.add_argument('--bytes-per-rank', type=int, default=2 ** 30,
                   help='of each format, per rank')
    p.add_argument('--checkpoint-bytes', type=int, default=0,
                   help='the whole checkpoint, shared by the ranks')
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--cpu', action='store_true', help='no GPU')
    args = p.parse_args(argv)
    args.formats = [f for f in args.formats.split(',') if f]
    unknown = [f for f in args.formats if f not in sb.FORMATS]
    if unknown:
        p.error(f'unknown format(s) {unknown}: use {", ".join(sb.FORMATS)}')
    if not os.path.isdir(args.dir):
        p.error(f'--dir {args.dir!r} is not a directory: set the '
                f"partition's extras['storage_dir'] or -S storage_dir=")
    return args


def run_directory(root, rank):
    '''``<root>/hpcml-storage-<id>``, one name for every rank (rank 0's
    time and process id).'''
    import torch.distributed as dist
    name = [f'hpcml-storage-{int(time.time())}-{os.getpid()}']
    dist.broadcast_object_list(name, src=0)
    return os.path.join(root, name[0])


def shard_dir(run_dir, what, writer):
    return os.path.join(run_dir, what, f'rank{writer:05d}')


def write_data(args, run_dir, rank):
    '''This rank's share of every format, flushed to storage.'''
    spec = sb.SAMPLES[args.size]
    rng = np.random.default_rng(rank)
    for fmt in args.formats:
        directory = shard_dir(run_dir, fmt, rank)
        os.makedirs(directory, exist_ok=True)
        sb.WRITERS[fmt](directory, spec,
                        sb.file_count(fmt, spec, args.bytes_per_rank), rng)


def files_of(directory):
    return sorted(os.path.join(directory, n) for n in os.listdir(directory))


def timed(work):
    '''(work(), seconds), every rank starting together.'''
    import torch.distributed as dist
    dist.barrier()
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def drop_all(paths):
    '''Drop *paths* from the page cache: ``fadvise``, or ``none``.'''
    dropped = [sb.drop_cache(p) for p in paths]
    return 'fadvise' if dropped and all(dropped) else 'none'


def report(rank, round_, op, nbytes, seconds, files, writer, cache):
    line = (f'[storage_bench] rank {rank} round {round_} op {op} bytes '
            f'{nbytes} seconds {seconds:.6f} files {files} writer {writer} '
            f'cache {cache}')
    sys.stdout.write(line + '\n')
    sys.stdout.flush()


def read_round(args, run_dir, rank, writer, round_):
    for fmt in args.formats:
        paths = files_of(shard_dir(run_dir, fmt, writer))
        cache = drop_all(paths)
        nbytes, seconds = timed(lambda: sb.read_all(fmt, paths))
        report(rank, round_, f'read_{fmt}', nbytes, seconds, len(paths),
               writer, cache)


def make_state(nbytes):
    '''A state dict of float32 tensors of *nbytes* in all, each at most
    :data:`CHUNK_BYTES`, of distinct values.'''
    import torch
    first = torch.randn(min(nbytes, CHUNK_BYTES) // 4)
    state, left, i = {}, nbytes // 4, 0
    while left > 0:
        n = min(left, first.numel())
        state[f'layer{i}.weight'] = first[:n] + i
        left, i = left - n, i + 1
    return state


def checkpoint_round(args, run_dir, rank, world, writer, round_):
    import torch
    # One file per rank, rewritten each round: the barrier before the
    # next write comes after every rank's read of this one.
    mine = os.path.join(shard_dir(run_dir, 'checkpoint', rank), 'state.pt')
    os.makedirs(os.path.dirname(mine), exist_ok=True)
    state = make_state(args.checkpoint_bytes // world)

    def save():
        with open(mine, 'wb') as fp:
            torch.save(state, fp)
            sb.durable(fp)
    _, seconds = timed(save)
    del state
    report(rank, round_, 'checkpoint_write', os.path.getsize(mine), seconds,
           1, rank, 'fsync')
    theirs = os.path.join(shard_dir(run_dir, 'checkpoint', writer),
                          'state.pt')
    cache = drop_all([theirs])
    loaded, seconds = timed(lambda: torch.load(theirs, map_location='cpu',
                                               weights_only=True))
    report(rank, round_, 'checkpoint_read', os.path.getsize(theirs),
           seconds, 1, writer, cache)
    del loaded


def settings_line(args, run_dir, world, per_node):
    return (f'storage_bench: directory {run_dir}, {world} rank(s), '
            f'{per_node} per node, formats {" ".join(args.formats)}, '
            f'{args.bytes_per_rank} bytes per rank of each ({args.size} '
            f'samples), checkpoint {args.checkpoint_bytes} bytes sharded '
            f'over the ranks, {args.rounds} round(s); page cache: '
            f'posix_fadvise(POSIX_FADV_DONTNEED) after fsync before each '
            f'read; rank r reads what rank (r + {per_node}) % {world} wrote')


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch.distributed as dist

    import torch_device
    rank, world, device = torch_device.start_ranks(cpu=args.cpu,
                                                   computes=False)
    if world == 1:
        dist.init_process_group('gloo', rank=0, world_size=1,
                                store=dist.HashStore())
    per_node = int(os.environ.get('LOCAL_WORLD_SIZE', world))
    writer = (rank + per_node) % world
    run_dir = run_directory(args.dir, rank)
    if rank == 0:
        print(settings_line(args, run_dir, world, per_node), flush=True)
    write_data(args, run_dir, rank)
    begin = time.time()
    for round_ in range(args.rounds):
        read_round(args, run_dir, rank, writer, round_)
        if args.checkpoint_bytes:
            checkpoint_round(args, run_dir, rank, world, writer, round_)
    dist.barrier()
    if rank == 0:
        print(f'[hpcml] timed region {begin:.3f} {time.time():.3f}',
              flush=True)
        shutil.rmtree(run_dir, ignore_errors=True)
    torch_device.end_ranks(device, rank)
    return 0


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
