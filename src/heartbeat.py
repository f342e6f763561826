"""A rank's heartbeat, for the hang watch of its task's reaper
(:mod:`hang_watch`, run by ``src/reaper.py``): how many steps the rank has
done and when it last made progress, and its Python stack on request.

Every program starts here (:func:`fast_exit.run` calls :func:`start`).
Where the task's reaper watches (``HPCML_HANG_BEATS``: a node-local
directory it made), the rank keeps:

- ``rank<R>.beat``: one fixed record (:data:`RECORD`), mapped into memory
  (``mmap``, ``MAP_SHARED``): its PID, rank and world size, then its
  progress, updated in place with no system call. The watcher, on the
  same node, reads the file and sees the same page.
- ``rank<R>.stack``: where ``faulthandler`` writes every thread's Python
  stack when the rank gets :data:`DUMP_SIGNAL` (a handler in C: it runs
  even while the rank is stuck in a collective or holds the GIL).

Progress is :func:`step` (a training step done: each optimizer step of a
PyTorch program, :func:`watch_torch`; a program's own loop where it has
no optimizer) and :func:`beat` (progress that is not a step: a batch
read from a DataLoader, an evaluation batch). The watch arms at the
first step: start-up, rendezvous, compilation and the first step's
warm-up set no pace. One update costs about 0.4 microseconds
(``bench/hang_bench.py``), against milliseconds a step.

Unset ``HPCML_HANG_BEATS`` (a program run outside the suite, or the
watch off): every function here does nothing. Standard library only:
TensorFlow's program uses it too.
"""
import faulthandler
import mmap
import os
import signal
import struct
import time

#: The reaper's node-local directory of this task's heartbeats.
BEATS_DIR = 'HPCML_HANG_BEATS'

#: The signal on which a rank writes its threads' stacks: a real-time
#: signal no launcher or framework uses (SIGUSR1 and SIGUSR2 are Slurm's
#: and the programs' own). Sent only to a PID that registered it.
DUMP_SIGNAL = signal.SIGRTMIN + 4

#: The record: magic, PID, rank, world size (the header, written once);
#: beats, steps, last beat, first step, the step before the last, last
#: step (Unix seconds).
RECORD = struct.Struct('<4sIiiqqdddd')
HEADER = struct.Struct('<4sIii')
PROGRESS = struct.Struct('<qqdddd')
MAGIC = b'HPB2'

_state = None


class _Beats:
    '''The mapped record and the counts it holds.'''

    def __init__(self, path, rank, world):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, RECORD.size)
            self.map = mmap.mmap(fd, RECORD.size)
        finally:
            os.close(fd)
        HEADER.pack_into(self.map, 0, MAGIC, os.getpid(), rank, world)
        self.beats = self.steps = 0
        self.first = self.previous = self.last_step = 0.0

    def write(self, now):
        PROGRESS.pack_into(self.map, HEADER.size, self.beats, self.steps,
                           now, self.first, self.previous, self.last_step)


def start(env=None):
    '''Keep this rank's heartbeat and answer :data:`DUMP_SIGNAL` with its
    stacks, where ``HPCML_HANG_BEATS`` is set; once per process.'''
    global _state
    env = os.environ if env is None else env
    directory = env.get(BEATS_DIR)
    if _state is not None or not directory or not os.path.isdir(directory):
        return
    rank = int(env.get('RANK', 0) or 0)
    world = int(env.get('WORLD_SIZE', 1) or 1)
    try:
        beats = _Beats(os.path.join(directory, f'rank{rank}.beat'), rank,
                       world)
        stack = open(os.path.join(directory, f'rank{rank}.stack'), 'w')
        faulthandler.register(DUMP_SIGNAL, file=stack, all_threads=True,
                              chain=False)
    except (OSError, ValueError, RuntimeError):
        return                      # no watch rather than no run
    beats.stack = stack             # kept open: faulthandler writes to it
    _state = beats
    # A forked child (a DataLoader's worker) is not the rank.
    os.register_at_fork(after_in_child=_forget)


def _forget():
    global _state
    _state = None


def step():
    '''A training step done: the rank's progress, and its pace.'''
    state = _state
    if state is None:
        return
    now = time.time()
    state.beats += 1
    state.steps += 1
    if state.steps == 1:
        state.first = now
    state.previous, state.last_step = state.last_step, now
    state.write(now)


def beat():
    '''Progress that is no step (a batch read, an evaluation batch).'''
    state = _state
    if state is None:
        return
    state.beats += 1
    state.write(time.time())


def watch_torch():
    '''Count every optimizer step of this PyTorch process as a
    :func:`step` (torch's global post-step hook: OpenCLIP's, HF
    Trainer's, Megatron's optimizers alike) and every batch a DataLoader
    yields as a :func:`beat` (evaluation loops, and a data loader that
    stopped yields none). Once per process; nothing where unwatched.'''
    state = _state
    if state is None or getattr(state, 'torch', False):
        return
    state.torch = True
    from torch.optim.optimizer import register_optimizer_step_post_hook
    register_optimizer_step_post_hook(lambda *_: step())
    try:
        from torch.utils.data.dataloader import _BaseDataLoaderIter
    except ImportError:
        return
    following = _BaseDataLoaderIter.__next__

    def __next__(self):
        item = following(self)
        beat()
        return item
    _BaseDataLoaderIter.__next__ = __next__


def read(path):
    '''The record of heartbeat file *path* as a dict (``pid``, ``rank``,
    ``world``, ``beats``, ``steps``, ``last``, ``first_step``,
    ``previous_step``, ``last_step``); None where it holds none yet.'''
    try:
        with open(path, 'rb') as f:
            data = f.read(RECORD.size)
    except OSError:
        return None
    if len(data) < RECORD.size or data[:4] != MAGIC:
        return None
    _, pid, rank, world, beats, steps, last, first, previous, last_step = \
        RECORD.unpack(data)
    return {'pid': pid, 'rank': rank, 'world': world, 'beats': beats,
            'steps': steps, 'last': last, 'first_step': first,
            'previous_step': previous, 'last_step': last_step}
