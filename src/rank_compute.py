"""Each rank's own compute time per training step, before it waits for the
others: the ``[hpcml] rank_compute`` record (fields:
:mod:`hpctestlib_ml.parsers.hpcml_records`), from which the check names
the slowest rank and its node.

What is measured, and why the forward pass: under DistributedDataParallel
a rank's step is forward, backward with the gradients' all-reduce
overlapped (each bucket's all-reduce starts as its gradients are ready
and the step waits for the last one at the end of the backward), then the
optimizer. A slow rank does not show in its own step time: every rank
leaves the all-reduce together, and the slow rank's lateness is its
peers' wait. Its forward pass, though, holds no collective: DDP
broadcasts its buffers (BatchNorm's statistics) *before* it calls the
wrapped module, and all-reduces the gradients after it, in the backward.
So the time from the wrapped module's forward pre-hook to its forward
hook is the rank's own work alone, on every rank, fast or slow; a node
that is slower by a factor (fewer or slower cores, a busy neighbour, a
lower clock) is slower by that factor in its forward as in its backward
(which costs about twice the forward, layer for layer: Kaplan et al.
2020, "Scaling laws for neural language models", section 2.1). The
alternative, the step's time minus the time blocked in the all-reduce
(timed with DDP's communication hook), must place the moment the last
bucket's gradients were ready on the device's timeline, which overlap
hides on a GPU, and DDP's buffer broadcast at the forward's start would
still put the slow rank's lateness into the others' figure. A straggler
only in the backward (a slow gradient hook) is not seen here; the step
time still shows it.

How: hooks on the module itself, so that the shared training loop
(:func:`mlperf_train.train`) and ResNet-50's own loop get the measure
without touching their step functions: ``time.perf_counter`` on the CPU;
on GPUs a pair of CUDA events on the current stream, read once the run is
over, so that the measure adds no synchronisation to the step. A step's
figure sums its forward calls (gradient accumulation calls it more than
once). The record gives the mean over the timed steps (what the step
time follows: a throttled node is slowed in bursts, so its median step
can look unslowed) and the median and maximum beside it.

One model per program: :func:`watch` keeps it in this module, as
:mod:`torch_device` keeps the first step's memory peak.
"""
import socket
import statistics
import time

import torch

import hpcml_log


class ForwardTimer:
    '''The forward passes of *module* on *device*, per step: seconds on
    the CPU, CUDA event pairs on a GPU (read after the device is
    synchronized).'''

    def __init__(self, module, device):
        self.cuda = device.type == 'cuda'
        self.steps = []         # closed steps: [(start, end), ...] each
        self.current = []
        module.register_forward_pre_hook(self._started)
        module.register_forward_hook(self._ended)

    def _now(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _started(self, *_):
        self.current.append([self._now(), None])

    def _ended(self, *_):
        if self.current and self.current[-1][1] is None:
            self.current[-1][1] = self._now()

    def step_done(self):
        '''Close the step whose forward passes were timed so far.'''
        self.steps.append([pair for pair in self.current if pair[1]])
        self.current = []

    def discard(self):
        '''Forget the steps so far (the untimed warm-up).'''
        self.steps, self.current = [], []

    def seconds(self):
        '''Each closed step's forward seconds (on a GPU, call it once the
        device has finished those steps).'''
        if not self.cuda:
            return [sum(end - start for start, end in step)
                    for step in self.steps]
        return [sum(start.elapsed_time(end) for start, end in step) / 1e3
                for step in self.steps]


_TIMER = None


def watch(module, device):
    '''Time *module*'s forward passes from now on (the programs' model,
    before DDP wraps it: :func:`mlperf_train.wrap_ddp`).'''
    global _TIMER
    _TIMER = ForwardTimer(module, device)


def step_done():
    '''A training step has ended (no-op where nothing is watched).'''
    if _TIMER is not None:
        _TIMER.step_done()


def discard():
    '''Drop the steps so far: the untimed warm-up.'''
    if _TIMER is not None:
        _TIMER.discard()


def facts(rank, seconds, node=None):
    '''The ``rank_compute`` record's fields for a rank's per-step forward
    *seconds*; None without steps.'''
    if not seconds:
        return None
    return {'rank': rank, 'node': node or socket.gethostname(),
            'measure': 'forward', 'steps': len(seconds),
            'mean_s': round(statistics.fmean(seconds), 6),
            'median_s': round(statistics.median(seconds), 6),
            'max_s': round(max(seconds), 6)}


def emit(rank):
    '''Print this rank's ``rank_compute`` record of the timed steps
    (nothing where no model is watched or no step was timed).'''
    if _TIMER is None:
        return
    record = facts(rank, _TIMER.seconds())
    if record:
        hpcml_log.emit('rank_compute', **record)
