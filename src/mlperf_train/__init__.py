"""What the suite's MLPerf-style training programs share (bert_pretrain,
cosmoflow, ...): torch.distributed start-up from the launcher's env://
variables, MLPerf logging on rank 0 (:mod:`mlperf_train.events`), the
timed step loop that logs one ``tracked_stats`` event per step, as MLPerf
reference implementations do, and the evaluation.
"""
import math
import time

import torch
import torch.distributed as dist

import heartbeat
import hpcml_log
from mlperf_train.events import MLLog, log_header


def wrap_ddp(model, device, world):
    '''*model* in DistributedDataParallel where *world* > 1; its forward
    passes timed per step either way (:func:`rank_compute.watch`: each
    rank's own compute, the ``rank_compute`` record).'''
    import rank_compute
    rank_compute.watch(model, device)
    if world == 1:
        return model
    return torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == 'cuda' else None)


#: Device memory that a pool of synthetic batches may take
#: (:class:`Batches`).
POOL_BYTES = 512 * 2 ** 20


def nbytes(batch):
    '''Bytes of the tensors in *batch* (a tensor, or tuples, lists and
    dicts of them).'''
    if isinstance(batch, torch.Tensor):
        return batch.numel() * batch.element_size()
    if isinstance(batch, dict):
        return sum(nbytes(v) for v in batch.values())
    if isinstance(batch, (tuple, list)):
        return sum(nbytes(v) for v in batch)
    return 0


def pool_size(batch_bytes, steps, budget=POOL_BYTES):
    '''How many distinct synthetic batches to keep on the device: one per
    step where they fit in *budget*, else as many as fit (at least 1).'''
    return max(1, min(steps, budget // max(1, batch_bytes)))


class Batches:
    '''The training batches of a run, on its device, and the seconds the
    steps waited for them (:attr:`seconds`).

    *pooled* (synthetic data): :func:`pool_size` batches are drawn from
    *source* and moved to the device here, before the run starts, then
    cycled; generating data is the host's work and no part of the
    benchmark (tf_cnn_benchmarks and the MLPerf references' synthetic
    modes reuse batches on the device alike). A run's tiny batches all fit,
    so its data is what it was without the pool. Otherwise (a dataset)
    each batch is read and copied to the device when a step asks for it,
    and that time is the step's data time. *source* keeps going after the
    pool: held-out batches for the evaluation come from it, never seen in
    training.'''

    def __init__(self, source, device, steps, pooled):
        self.source, self.device = source, device
        self.seconds = 0.0
        self.pool, self.next = [], 0
        if pooled:
            first = to_device(next(source), device)
            count = pool_size(nbytes(first), steps)
            self.pool = [first] + [to_device(next(source), device)
                                   for _ in range(count - 1)]

    def __iter__(self):
        return self

    def __next__(self):
        start = time.perf_counter()
        if self.pool:
            batch = self.pool[self.next % len(self.pool)]
            self.next += 1
        else:
            batch = to_device(next(self.source), self.device)
            if self.device.type == 'cuda':
                torch.cuda.synchronize()
        self.seconds += time.perf_counter() - start
        return batch


def train(log, step, steps, global_batch, device, world, epoch=1,
          batches=None):
    '''``run_start``, then one epoch of ``step(n) -> loss`` *steps* times,
    logging each step's global samples/s, time, data time (the part spent
    waiting for *batches*, a :class:`Batches`) and loss; returns the run's
    status: ``success``, or ``aborted`` at the first non-finite loss.
    Then, on every rank, the ``timing``, ``rank_compute`` and ``memory``
    records (:mod:`hpcml_log`) of the steady-state steps (the first not
    counted; its memory peak is the record's
    ``first_step_peak_reserved_MiB``).'''
    import rank_compute
    import torch_device
    mlc = log.constants
    if world > 1:
        dist.barrier()
    log.start(mlc.RUN_START)
    log.start(mlc.EPOCH_START, epoch_num=epoch)
    status, n = 'success', 0
    data_total = compute_total = 0.0
    for n in range(1, steps + 1):
        waited = batches.seconds if batches else 0.0
        start = time.perf_counter()
        loss = step(n)
        if device.type == 'cuda':
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        rank_compute.step_done()
        data = (batches.seconds - waited) if batches else 0.0
        log.event('tracked_stats', {'throughput': global_batch / seconds,
                                    'step_time': seconds, 'data_time': data,
                                    'loss': loss},
                  step=n, epoch_num=epoch)
        if n > 1:
            data_total += data
            compute_total += seconds - data
        else:
            torch_device.end_warmup(device)
            rank_compute.discard()
        if not math.isfinite(loss):
            status = 'aborted'
            break
    log.end(mlc.EPOCH_STOP, epoch_num=epoch, step_num=n)
    hpcml_log.emit_timing(log.rank, max(0, n - 1), data_total,
                          compute_total)
    rank_compute.emit(log.rank)
    torch_device.emit_memory(device, log.rank)
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


def grad_scaler(device, precision):
    '''A loss scaler for ``fp16`` (whose small gradients underflow
    without one, as in every fp16 reference); a no-op otherwise.'''
    return torch.amp.GradScaler(device.type, enabled=precision == 'fp16')


def log_setup(log, values):
    '''One event per (key, value): the run's configuration.'''
    for key, value in values:
        log.event(key, value)


def to_device(x, device):
    '''A tensor, or tuples, lists and dicts of them (a model's several
    inputs, a target's parts), on *device*.'''
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return tuple(to_device(t, device) for t in x)
    return x.to(device)


def forward(model, x):
    '''*model* on input *x*: one tensor, or a tuple of its inputs.'''
    return model(*x) if isinstance(x, tuple) else model(x)


def supervised_step(model, batches, loss_fn, optimizer, device, precision,
                    clip_grad_norm=None, scheduler=None):
    '''``step(n) -> loss`` for (input, target) *batches* already on the
    device (:class:`Batches`); the input is a tensor or a tuple of them.
    *clip_grad_norm*: clip the gradients' norm; *scheduler*: a
    learning-rate schedule stepped after each update. fp16 scales the
    loss (:func:`grad_scaler`).'''
    scaler = grad_scaler(device, precision)

    def step(_):
        x, y = next(batches)
        with autocast(device, precision):
            loss = loss_fn(forward(model, x), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if clip_grad_norm:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        if scheduler is not None:
            scheduler.step()
        return loss.item()
    return step


def evaluate(model, batches, count, metric, device, world,
             precision='fp32'):
    '''Mean of ``metric(output, target)`` over *count* batches and all
    ranks, the model in eval mode (forward under *precision*'s autocast);
    each batch a beat of the rank's heartbeat (:mod:`heartbeat`: the
    evaluation is progress too).'''
    model.eval()
    with torch.no_grad():
        values = []
        for _ in range(count):
            x, y = to_device(next(batches), device)
            with autocast(device, precision):
                out = forward(model, x)
            values.append(metric(out, y))
            heartbeat.beat()
        value = torch.stack(values).mean()
    if world > 1:
        dist.all_reduce(value)
        value /= world
    return value.item()


def argument_parser(description, sizes, batch_size, steps=10):
    '''The options every MLPerf-style program takes, as
    ``hpctestlib_ml.workloads.mlperf.MLLogTraining.program_args`` passes them:
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
    group, the device's math mode and ``device`` record
    (:mod:`torch_device`), the log's header
    (:func:`mlperf_train.events.log_header`) and seeding. *division*
    ``closed``: the benchmark's model and hyperparameters; ``open``:
    another size.'''
    import torch_device
    rank, world, device = torch_device.start_ranks(
        bf16=args.precision == 'bf16')
    log = MLLog(rank)
    log_header(log, benchmark, division, getattr(args, 'platform', None),
               args.seed, world, world if device.type == 'cuda' else 0)
    torch.manual_seed(args.seed)
    return rank, world, device, log
