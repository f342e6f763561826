"""What the suite's MLPerf-style training programs share (bert_pretrain,
cosmoflow, ...): torch.distributed start-up from the launcher's env://
variables, MLPerf logging on rank 0, and the timed step loop that logs one
``tracked_stats`` event per step, as MLPerf reference implementations do.
"""
import math
import os
import time

import torch
import torch.distributed as dist


def init_distributed():
    '''(rank, world size, device): a process group when WORLD_SIZE > 1
    (nccl on GPUs, gloo on CPUs), this rank's GPU or the CPU.'''
    world = int(os.environ.get('WORLD_SIZE', 1))
    if torch.cuda.is_available():
        device = torch.device(f'cuda:{int(os.environ.get("LOCAL_RANK", 0))}')
        torch.cuda.set_device(device)
    else:
        device = torch.device('cpu')
    if world > 1:
        dist.init_process_group('nccl' if device.type == 'cuda' else 'gloo')
        return dist.get_rank(), world, device
    return 0, 1, device


def wrap_ddp(model, device, world):
    if world == 1:
        return model
    return torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == 'cuda' else None)


class MLLog:
    '''MLPerf events from rank 0 (mlperf-logging's ``:::MLLOG`` lines).'''

    def __init__(self, rank):
        from mlperf_logging import mllog
        # Events name the caller of event()/start()/end(), not this class.
        mllog.config(default_stack_offset=3)
        self.rank = rank
        self.logger = mllog.get_mllogger()
        self.constants = mllog.constants

    def _log(self, kind, key, value, metadata):
        if self.rank == 0:
            getattr(self.logger, kind)(key=key, value=value,
                                       metadata=metadata)

    def event(self, key, value=None, **metadata):
        self._log('event', key, value, metadata)

    def start(self, key, value=None, **metadata):
        self._log('start', key, value, metadata)

    def end(self, key, value=None, **metadata):
        self._log('end', key, value, metadata)


def run_steps(log, step, steps, global_batch, device, world):
    '''Run ``step(n) -> loss`` *steps* times between run_start and run_stop,
    logging each step's global samples/s, time and loss; the run_stop
    status: ``success``, or ``aborted`` at the first non-finite loss.'''
    if world > 1:
        dist.barrier()
    log.start(log.constants.RUN_START)
    status = 'success'
    for n in range(1, steps + 1):
        start = time.perf_counter()
        loss = step(n)
        if device.type == 'cuda':
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        log.event('tracked_stats', {'throughput': global_batch / seconds,
                                    'step_time': seconds, 'loss': loss},
                  step=n)
        if not math.isfinite(loss):
            status = 'aborted'
            break
    if world > 1:
        dist.barrier()
    log.end(log.constants.RUN_STOP, status=status)
    return status


def finish(world):
    if world > 1:
        dist.destroy_process_group()


def autocast(device, precision):
    '''torch.autocast for ``bf16``/``fp16`` mixed precision; off for fp32.'''
    dtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(precision)
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def log_setup(log, values):
    '''One event per (key, value): the run's configuration.'''
    for key, value in values:
        log.event(key, value)


def to_device(x, device):
    '''A tensor, or a tuple of tensors (a model's several inputs), on
    *device*.'''
    if isinstance(x, (tuple, list)):
        return tuple(t.to(device) for t in x)
    return x.to(device)


def forward(model, x):
    '''*model* on input *x*: one tensor, or a tuple of its inputs.'''
    return model(*x) if isinstance(x, tuple) else model(x)


def supervised_step(model, batches, loss_fn, optimizer, device, precision,
                    clip_grad_norm=None):
    '''``step(n) -> loss`` for (input, target) batches; the input is a
    tensor or a tuple of them. *clip_grad_norm*: clip the gradients' norm.'''
    def step(_):
        x, y = next(batches)
        x, y = to_device(x, device), y.to(device)
        with autocast(device, precision):
            loss = loss_fn(forward(model, x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
        optimizer.step()
        return loss.item()
    return step


def evaluate(model, batches, count, metric, device, world,
             precision='fp32'):
    '''Mean of ``metric(output, target)`` over *count* batches and all
    ranks, the model in eval mode (forward under *precision*'s autocast).'''
    model.eval()
    with torch.no_grad():
        values = []
        for _ in range(count):
            x, y = next(batches)
            x, y = to_device(x, device), y.to(device)
            with autocast(device, precision):
                out = forward(model, x)
            values.append(metric(out, y))
        value = torch.stack(values).mean()
    if world > 1:
        dist.all_reduce(value)
        value /= world
    return value.item()


def argument_parser(description, sizes, batch_size, steps=10):
    '''The options every MLPerf-style program takes, as
    ``hpctestlib_ml.mlperf.MLLogTraining.program_args`` passes them:
    ``--size`` (a key of *sizes*), ``--batch-size`` (per rank),
    ``--steps``, ``--eval-batches``, ``--data``, ``--precision``,
    ``--seed``. Programs add their own.'''
    import argparse
    p = argparse.ArgumentParser(description=description)
    p.add_argument('--size', choices=list(sizes), default='tiny')
    p.add_argument('--batch-size', type=int, default=batch_size,
                   help='per rank')
    p.add_argument('--steps', type=int, default=steps)
    p.add_argument('--eval-batches', type=int, default=2)
    p.add_argument('--data', default='synthetic')
    p.add_argument('--precision', choices=('fp32', 'bf16', 'fp16'),
                   default='fp32')
    p.add_argument('--seed', type=int, default=0)
    return p


def run_main(main):
    '''The programs' ``__main__``: drop a leading ``--`` (torchrun's
    separator), exit with main()'s status, skipping the interpreter's
    teardown (:mod:`fast_exit`).'''
    import fast_exit
    fast_exit.run(main)


def start(benchmark, seed):
    '''Start a run: (rank, world size, device, MLLog) after the process
    group, the ``submission_benchmark`` event, ``init_start`` and seeding.'''
    rank, world, device = init_distributed()
    log = MLLog(rank)
    log.event(log.constants.SUBMISSION_BENCHMARK, benchmark)
    log.start(log.constants.INIT_START)
    torch.manual_seed(seed)
    return rank, world, device, log
