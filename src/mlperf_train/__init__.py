"""What the suite's MLPerf-style training programs share (bert_pretrain,
cosmoflow, ...): torch.distributed start-up from the launcher's env://
variables, MLPerf logging on rank 0 (:mod:`mlperf_train.events`), the
timed step loop that logs one ``tracked_stats`` event per step, as MLPerf
reference implementations do, and the evaluation.
"""
import math
import os
import time

import torch
import torch.distributed as dist

from mlperf_train.events import MLLog, log_header


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


def train(log, step, steps, global_batch, device, world, epoch=1):
    '''``run_start``, then one epoch of ``step(n) -> loss`` *steps* times,
    logging each step's global samples/s, time and loss; returns the run's
    status: ``success``, or ``aborted`` at the first non-finite loss.'''
    mlc = log.constants
    if world > 1:
        dist.barrier()
    log.start(mlc.RUN_START)
    log.start(mlc.EPOCH_START, epoch_num=epoch)
    status, n = 'success', 0
    for n in range(1, steps + 1):
        start = time.perf_counter()
        loss = step(n)
        if device.type == 'cuda':
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        log.event('tracked_stats', {'throughput': global_batch / seconds,
                                    'step_time': seconds, 'loss': loss},
                  step=n, epoch_num=epoch)
        if not math.isfinite(loss):
            status = 'aborted'
            break
    log.end(mlc.EPOCH_STOP, epoch_num=epoch, step_num=n)
    return status


def log_evaluation(log, key, compute, epoch=1):
    '''``eval_start``, *key* (``eval_accuracy``, ``eval_error``) with the
    value of ``compute()``, ``eval_stop``; *epoch*: the ``epoch_num`` of
    the events (BERT: samples trained, as MLPerf's BERT logs it).'''
    log.start(log.constants.EVAL_START, epoch_num=epoch)
    value = compute()
    log.event(key, value, epoch_num=epoch)
    log.end(log.constants.EVAL_STOP, epoch_num=epoch)
    return value


def stop(log, status, world):
    '''``run_stop`` with *status* once every rank is done; the process
    group ends. The program's exit status: 0 for ``success``.'''
    if world > 1:
        dist.barrier()
    log.end(log.constants.RUN_STOP, status=status)
    finish(world)
    return 0 if status == 'success' else 1


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
                    clip_grad_norm=None, scheduler=None):
    '''``step(n) -> loss`` for (input, target) batches; the input is a
    tensor or a tuple of them. *clip_grad_norm*: clip the gradients' norm;
    *scheduler*: a learning-rate schedule stepped after each update.'''
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
        if scheduler is not None:
            scheduler.step()
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
    ``--seed``, ``--platform``. Programs add their own.'''
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
    # MLPerf HPC's DeepCAM rules require a seed > 0.
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--platform', help='submission_platform of the log '
                   '(default: $HPCML_PLATFORM, else the host name)')
    return p


def run_main(main):
    '''The programs' ``__main__``: drop a leading ``--`` (torchrun's
    separator), exit with main()'s status, skipping the interpreter's
    teardown (:mod:`fast_exit`).'''
    import fast_exit
    fast_exit.run(main)


def start(benchmark, args, division):
    '''Start a run: (rank, world size, device, MLLog) after the process
    group, the log's header (:func:`mlperf_train.events.log_header`) and
    seeding. *division* ``closed``: the benchmark's model and
    hyperparameters; ``open``: another size.'''
    rank, world, device = init_distributed()
    log = MLLog(rank)
    log_header(log, benchmark, division, getattr(args, 'platform', None),
               args.seed, world, world if device.type == 'cuda' else 0)
    torch.manual_seed(args.seed)
    return rank, world, device, log
