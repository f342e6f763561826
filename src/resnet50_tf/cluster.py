"""TF_CONFIG for MultiWorkerMirroredStrategy, from the suite's launch env.

TensorFlow's workers need each other's host:port before they start; the
suite's launchers give each rank only RANK, WORLD_SIZE and its node's
address (PET_LOCAL_ADDR, from src/task_env.sh), in both launch modes
(srun one task per GPU, torchrun one task per node). So each rank picks a
free port on its node's address and publishes ``host:port`` as a file in a
rendezvous directory that all ranks see (the job's working directory: the
ReFrame stage directory, which is on a shared file system on clusters),
then waits for the other ranks' files. The directory is named after the
job's MASTER_ADDR:MASTER_PORT, unique among running jobs.
"""
import json
import os
import pathlib
import shutil
import socket
import time


def free_port(host):
    '''A port that is free on *host* now (the OS picks it).'''
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def rendezvous(directory, rank, world, address, timeout=300.0):
    '''Publish this rank's *address* and return every rank's, in rank
    order; raise TimeoutError naming the missing ranks.'''
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    mine = directory / f'{rank}.addr'
    partial = directory / f'.{rank}.addr.tmp'
    partial.write_text(address)
    partial.rename(mine)            # others never read a half-written file
    deadline = time.monotonic() + timeout
    while True:
        files = [directory / f'{r}.addr' for r in range(world)]
        missing = [r for r, f in enumerate(files) if not f.exists()]
        if not missing:
            return [f.read_text() for f in files]
        if time.monotonic() > deadline:
            raise TimeoutError(
                f'ranks {missing} did not publish their address in '
                f'{directory} within {timeout:.0f} s: is the directory on a '
                f'file system all nodes share?')
        time.sleep(0.1)


def rendezvous_dir(base_dir='.'):
    '''This job's rendezvous directory under *base_dir*.'''
    job = (f'{os.environ.get("MASTER_ADDR", "local")}_'
           f'{os.environ.get("MASTER_PORT", "0")}')
    return pathlib.Path(base_dir) / f'.tf_rendezvous_{job}'


def remove_rendezvous(base_dir='.'):
    '''Remove the rendezvous files (rank 0, once all ranks have trained
    together, so all have read them).'''
    shutil.rmtree(rendezvous_dir(base_dir), ignore_errors=True)


def tf_config(base_dir='.'):
    '''The TF_CONFIG of this rank, or None for a single worker.'''
    rank = int(os.environ.get('RANK', 0))
    world = int(os.environ.get('WORLD_SIZE', 1))
    if world == 1:
        return None
    host = os.environ.get('PET_LOCAL_ADDR') or '127.0.0.1'
    workers = rendezvous(rendezvous_dir(base_dir), rank, world,
                         f'{host}:{free_port(host)}')
    return {'cluster': {'worker': workers},
            'task': {'type': 'worker', 'index': rank}}


def export_tf_config(base_dir='.'):
    '''Set TF_CONFIG for this rank (before TensorFlow starts its
    strategy); return the world size.'''
    config = tf_config(base_dir)
    if config is None:
        return 1
    os.environ['TF_CONFIG'] = json.dumps(config)
    return len(config['cluster']['worker'])
