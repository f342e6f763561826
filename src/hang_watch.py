"""The hang watch of one task, run by its reaper (``src/reaper.py``), on
the task's node, over the ranks below it (one per task, or a node's under
torchrun): when no rank has advanced for longer than the bound, it
records every rank's stack, names the rank that stopped where the others
wait, and has the reaper end the task, so the job ends rather than
waiting for its time limit.

Switched on by the job (the check's ``hang_bound_s``): ``HPCML_HANG_DIR``
(the shared directory beside the job's output where the stacks go) and
``HPCML_HANG_BOUND_S`` (seconds > 0). The ranks' heartbeats
(:mod:`heartbeat`) are files in a node-local directory the watch makes
(in /dev/shm where it can) and passes down as ``HPCML_HANG_BEATS``.

The bound: :data:`STEPS` times the slowest rank's step time (its mean,
or its last step where longer: :func:`pace`), or ``HPCML_HANG_BOUND_S``,
whichever is longer; it arms at a rank's first step. The watch looks once a second (:data:`POLL`), reading its ranks'
records: no file system traffic while the job is healthy.

When it fires, on each node whose ranks stopped:

1. ``HPCML_HANG_DIR/hang`` is created (the first node's), which the
   other nodes' watches look for once their own ranks have been idle
   :data:`LOOK_AFTER` seconds: they record their ranks at once too;
2. each rank gets :data:`heartbeat.DUMP_SIGNAL` and writes its threads'
   stacks (``faulthandler``); a rank that writes none within
   :data:`DUMP_WAIT` s (stopped, or in uninterruptible sleep) is read by
   ``py-spy dump --nonblocking`` where py-spy is installed;
3. ``rank<R>.stack.txt`` and ``rank<R>.json`` (step, process state,
   main thread's frames) go to ``HPCML_HANG_DIR``;
4. it waits up to :data:`GATHER` s for every rank's report, then prints
   ``hpcml hang: <one line>`` (:func:`hang_report.summary`) on the job's
   standard error and has the reaper end the task.

Standard library only: the reaper runs with ``-S``. What only a hang
needs (:mod:`hang_report`, ``json``, ``subprocess``, ``shutil``) is
imported when the watch fires: every task's reaper starts in about 20
ms with the watch, as without it.
"""
import os
import sys
import time

import heartbeat

#: The shared directory of the reports; the bound's floor in seconds.
HANG_DIR = 'HPCML_HANG_DIR'
BOUND = 'HPCML_HANG_BOUND_S'

#: The bound in steps: no rank advanced for this many mean steps.
STEPS = 10

#: Seconds between looks at the heartbeats.
POLL = 1.0
#: Seconds its ranks are idle after which a watch looks for another
#: node's ``hang`` file.
LOOK_AFTER = 5.0
#: Seconds a rank has to write its stacks.
DUMP_WAIT = 3.0
#: Seconds to wait for every rank's report.
GATHER = 15.0
#: Seconds py-spy has to read a rank.
PY_SPY_WAIT = 10.0

#: The line's prefixes on the job's standard error.
LINE = 'hpcml hang: '
NOTICE = 'hpcml hang watch: '


def from_env(env, node):
    '''The :class:`Watch` the job asks for in *env*, on *node*; None
    where it asks for none (or gives a bound that is no number > 0).'''
    directory = env.get(HANG_DIR)
    try:
        bound = float(env.get(BOUND, ''))
    except ValueError:
        return None
    if not directory or not bound > 0:
        return None
    return Watch(directory, bound, node)


def beats_parent():
    '''/dev/shm where it is a writable directory (memory, on the node),
    else ``$TMPDIR``, else /tmp.'''
    shm = '/dev/shm'
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return os.environ.get('TMPDIR') or '/tmp'


def process_state(pid):
    '''The state letter of *pid* (``R``, ``S``, ``D``, ``T``, ``Z``), or
    None where it is gone.'''
    try:
        with open(f'/proc/{pid}/stat', 'rb') as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b')') + 2:][:1].decode()


def pace(record):
    '''A rank's step time: its mean step after the first, or its last
    step where that was longer (steps that grow, as the Collectives'
    sizes do, twice as long each); None before its second step.'''
    if record['steps'] < 2:
        return None
    mean = ((record['last_step'] - record['first_step']) /
            (record['steps'] - 1))
    return max(mean, record['last_step'] - record['previous_step'])


def bound(records, floor):
    '''The bound in seconds: :data:`STEPS` steps of the slowest rank
    (:func:`pace`), or *floor* where longer.'''
    paces = [p for p in map(pace, records) if p is not None]
    return max([floor] + [STEPS * p for p in paces])


def py_spy():
    '''py-spy's path, beside this Python or on PATH; None.'''
    import shutil
    here = os.path.join(os.path.dirname(sys.executable), 'py-spy')
    return here if os.access(here, os.X_OK) else shutil.which('py-spy')


class Watch:
    '''One task's watch (see the module's docstring).'''

    def __init__(self, directory, floor, node):
        self.directory, self.floor, self.node = directory, floor, node
        self.beats = os.path.join(
            beats_parent(), f'hpcml-beats.{os.getpid()}.{time.time_ns()}')
        os.mkdir(self.beats, 0o700)
        self.next_look = 0.0

    def child_env(self):
        '''What the task's processes get: the heartbeats' directory.'''
        return {heartbeat.BEATS_DIR: self.beats}

    def records(self):
        '''The heartbeat records of the ranks below (:func:`heartbeat.
        read`).'''
        found = []
        for name in sorted(os.listdir(self.beats)):
            if name.endswith('.beat'):
                record = heartbeat.read(os.path.join(self.beats, name))
                if record:
                    found.append(record)
        return found

    def hung(self, now=None):
        '''Whether the ranks below hang, looked at once per :data:`POLL`
        (ranks whose process has ended are left out); where they do,
        their stacks recorded and the hang said (all before this returns
        True: the reaper then ends the task).'''
        monotonic = time.monotonic()
        if monotonic < self.next_look:
            return False
        self.next_look = monotonic + POLL
        records = [r for r in self.records() if r['steps'] >= 1]
        now = time.time() if now is None else now
        if not self.stalled(records, now):
            return False
        # A rank whose process has ended is no hang: its launcher, ending
        # after it (torchrun's teardown), steps no more.
        records = [r for r in records
                   if process_state(r['pid']) not in (None, 'Z', 'X')]
        stalled = self.stalled(records, now)
        if not stalled:
            return False
        self.record(records, *stalled)
        return True

    def stalled(self, records, now):
        '''(seconds idle, the bound) where no rank of *records* has
        advanced for longer than the bound, or another node declared a
        hang and these have been idle :data:`LOOK_AFTER` s; else None.'''
        if not records:
            return None
        idle = now - max(r['last'] for r in records)
        limit = bound(records, self.floor)
        if idle > limit or (idle > LOOK_AFTER and self.declared()):
            return idle, limit
        return None

    def declared(self):
        return os.path.exists(os.path.join(self.directory, 'hang'))

    def record(self, records, idle, limit):
        '''Declare the hang, record the ranks below, gather every rank's
        report and print the line.'''
        import json

        import hang_report
        os.makedirs(self.directory, exist_ok=True)
        try:
            fd = os.open(os.path.join(self.directory, 'hang'),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, json.dumps({'node': self.node, 'idle_s': idle,
                                     'bound_s': limit}).encode())
            os.close(fd)
        except FileExistsError:
            pass
        print(f'{NOTICE}no rank on {self.node} advanced for '
              f'{hang_report.seconds(idle)} (bound '
              f'{hang_report.seconds(limit)}): recording stacks in '
              f'{self.directory}', file=sys.stderr, flush=True)
        for report in self.dump(records):
            self.write(report)
        world = max(r['world'] for r in records)
        reports = self.gather(world)
        line = hang_report.summary(reports, world, idle, limit)
        print(f'{LINE}{line}; stacks in '
              f'{os.path.basename(self.directory)}/', file=sys.stderr,
              flush=True)

    def dump(self, records):
        '''Each rank's report: its record, node, process state and main
        thread's frames, with its stack's text.'''
        import hang_report
        states = {r['pid']: process_state(r['pid']) for r in records}
        asked = []
        for r in records:
            if states[r['pid']] not in (None, 'Z', 'T', 't'):
                try:
                    os.kill(r['pid'], heartbeat.DUMP_SIGNAL)
                    asked.append(r)
                except OSError:
                    pass
        stacks = self.wait_for_stacks(asked)
        spy = py_spy()
        reports = []
        for r in records:
            text, source = stacks.get(r['rank'], ''), 'faulthandler'
            if not text.strip() and spy:
                text, source = self.spy(spy, r['pid']), 'py-spy'
            if not text.strip():
                source = None
            reports.append({
                **r, 'node': self.node, 'state': states[r['pid']],
                'stack_from': source,
                'frames': hang_report.main_frames(text, r['pid']),
                'stack': text})
        return reports

    def stack_path(self, rank):
        return os.path.join(self.beats, f'rank{rank}.stack')

    def wait_for_stacks(self, asked):
        '''Rank -> the stack text each of *asked* wrote within
        :data:`DUMP_WAIT` s (its size steady for 0.3 s).'''
        deadline = time.monotonic() + DUMP_WAIT
        sizes, steady = {}, {}
        while time.monotonic() < deadline:
            for r in asked:
                try:
                    size = os.path.getsize(self.stack_path(r['rank']))
                except OSError:
                    size = 0
                if size and sizes.get(r['rank']) == size:
                    steady.setdefault(r['rank'], time.monotonic())
                else:
                    steady.pop(r['rank'], None)
                sizes[r['rank']] = size
            if len(asked) == len([k for k, t in steady.items()
                                  if time.monotonic() - t >= 0.3]):
                break
            time.sleep(0.1)
        found = {}
        for r in asked:
            try:
                with open(self.stack_path(r['rank']),
                          errors='replace') as f:
                    found[r['rank']] = f.read()
            except OSError:
                pass
        return found

    @staticmethod
    def spy(command, pid):
        '''``py-spy dump`` of *pid* without stopping it ('' where it
        fails).'''
        import subprocess
        try:
            done = subprocess.run(
                [command, 'dump', '--nonblocking', '--full-filenames',
                 '--pid', str(pid)], capture_output=True, text=True,
                timeout=PY_SPY_WAIT, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return ''
        return done.stdout if done.returncode == 0 else ''

    def write(self, report):
        '''``rank<R>.stack.txt`` and ``rank<R>.json`` in the shared
        directory (the JSON last: its presence says the report is
        whole).'''
        import json
        rank = report['rank']
        head = (f"# rank {rank} on {report['node']}, pid {report['pid']}, "
                f"state {report['state']}, step {report['steps']}, stack "
                f"from {report['stack_from']}\n")
        with open(os.path.join(self.directory, f'rank{rank}.stack.txt'),
                  'w') as f:
            f.write(head + report['stack'])
        fields = {k: v for k, v in report.items() if k != 'stack'}
        path = os.path.join(self.directory, f'rank{rank}.json')
        with open(path + '.part', 'w') as f:
            json.dump(fields, f)
        os.replace(path + '.part', path)

    def gather(self, world):
        '''Every rank's report in the shared directory, waiting up to
        :data:`GATHER` s for those of other nodes.'''
        import json
        deadline = time.monotonic() + GATHER
        while True:
            reports = []
            for rank in range(world):
                try:
                    with open(os.path.join(self.directory,
                                           f'rank{rank}.json')) as f:
                        reports.append(json.load(f))
                except (OSError, ValueError):
                    pass
            if len(reports) == world or time.monotonic() >= deadline:
                return reports
            time.sleep(0.5)

    def close(self):
        '''Remove the heartbeats' directory (its files: no subdirectory).'''
        try:
            for name in os.listdir(self.beats):
                os.remove(os.path.join(self.beats, name))
            os.rmdir(self.beats)
        except OSError:
            pass
