"""A case that ends takes every process of its job with it: src/reaper.py,
under which src/task_env.sh starts every task (issue 43, section 3).

The programs here stand for ranks that do not end by themselves: each
ignores SIGTERM (a rank whose handler cannot run while it waits in a
collective) and leaves a helper in a session of its own (double fork and
setsid, as a daemon detaches), which nothing but the reaper finds."""
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import BIN, REPO

REAPER = REPO / 'src' / 'reaper.py'

#: A rank: writes ``<kind><rank>.<pid>`` into $REAP_TEST_DIR for itself
#: and the helper it detaches, then sleeps, ignoring SIGTERM, for
#: $REAP_TEST_SLEEP s (300) and exits with $REAP_TEST_STATUS (0).
RANK = '''
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
ready = os.environ['REAP_TEST_DIR']
rank = os.environ.get('RANK', '0')
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        open(os.path.join(ready, f'helper{rank}.{os.getpid()}'), 'w').close()
        time.sleep(300)
    os._exit(0)
open(os.path.join(ready, f'rank{rank}.{os.getpid()}'), 'w').close()
time.sleep(float(os.environ.get('REAP_TEST_SLEEP', 300)))
sys.exit(int(os.environ.get('REAP_TEST_STATUS', 0)))
'''


def alive(pid):
    '''Whether *pid* runs (a zombie does not).'''
    try:
        stat = pathlib.Path(f'/proc/{pid}/stat').read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b')') + 2:][:1] != b'Z'


def started(ready, count, timeout=60):
    '''PIDs of the *count* processes that have written into *ready*.'''
    deadline = time.monotonic() + timeout
    while len(list(ready.iterdir())) < count:
        assert time.monotonic() < deadline, \
            f'{count} processes not up in {timeout} s: {os.listdir(ready)}'
        time.sleep(0.1)
    return {p.name: int(p.name.split('.')[1]) for p in ready.iterdir()}


def wait_gone(pids, timeout):
    '''The PIDs among *pids* still running after up to *timeout* s.'''
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return sorted(p for p in pids if alive(p))


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def rank(tmp_path):
    '''(the rank program, its $REAP_TEST_DIR, its environment, whose
    marker names every process of the test); what is left of them is
    killed at the end.'''
    program = tmp_path / 'rank.py'
    program.write_text(RANK)
    ready = tmp_path / 'ready'
    ready.mkdir()
    marker = str(uuid.uuid4())
    yield program, ready, {**os.environ, 'REAP_TEST_DIR': str(ready),
                           'REAP_TEST_MARKER': marker,
                           'HPCML_REAPER_GRACE': '0.5'}
    kill_all(marked(f'REAP_TEST_MARKER={marker}'.encode()))


def reaper(*command):
    return [sys.executable, '-S', str(REAPER), *map(str, command)]


def test_the_commands_status_and_nothing_it_left(rank):
    '''About 0.3 s. The command's exit status is the reaper's; the helper
    it detached ends with it.'''
    program, ready, env = rank
    proc = subprocess.run(reaper(sys.executable, program), timeout=30,
                          env={**env, 'REAP_TEST_SLEEP': '0.2',
                               'REAP_TEST_STATUS': '3'})
    pids = started(ready, 2, timeout=20)
    assert proc.returncode == 3
    assert wait_gone(pids.values(), 5) == []


def test_killed_as_the_command_was_killed(tmp_path):
    '''About 0.1 s: a command killed by a signal kills the reaper with
    it, as if it had been exec'd (srun and torchrun report the signal).'''
    proc = subprocess.run(reaper('sh', '-c', 'kill -USR2 $$'), timeout=30)
    assert proc.returncode == -signal.SIGUSR2


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT])
def test_an_ending_signal_ends_every_descendant(rank, signum):
    '''About 1 s: SIGTERM or SIGINT to the reaper (srun's, a container
    runtime's) reaches every process below it; the rank, which ignores
    SIGTERM, is killed after the grace (0.5 s here).'''
    program, ready, env = rank
    proc = subprocess.Popen(reaper(sys.executable, program), env=env)
    pids = started(ready, 2, timeout=20)
    proc.send_signal(signum)
    status = proc.wait(timeout=30)
    assert wait_gone(pids.values(), 5) == []
    # The rank's end: SIGKILL after the grace; SIGINT's KeyboardInterrupt.
    assert status == (-signal.SIGKILL if signum == signal.SIGTERM
                      else -signal.SIGINT)


def test_the_job_groups_sigkill_spares_the_reaper(rank):
    '''About 1 s: ReFrame's local scheduler ends a job by SIGTERM, then
    SIGKILL, to the job's process group: that kills the job's shell and
    the command, not the reaper, which left the group, and which then
    ends what is left (the helper, in a session of its own).'''
    program, ready, env = rank
    job = subprocess.Popen(
        ['sh', '-c', shlex.join(reaper(sys.executable, program)) + '; :'],
        env=env, start_new_session=True)
    started(ready, 2, timeout=20)
    os.killpg(job.pid, signal.SIGTERM)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    marker = f'REAP_TEST_MARKER={env["REAP_TEST_MARKER"]}'.encode()
    deadline = time.monotonic() + 5
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked(marker) == []     # the reaper too


# The suite's own launch: a 2-rank torchrun case on config/local.py, its
# program replaced by the rank above (``-S python_path=``: a ``cosmoflow``
# package put before src/ on the job's PYTHONPATH). Its reframe, or
# ``hpcml suite``, started in a session of its own as a user's would be,
# gets the signal once both ranks and their helpers are up; every process
# of the job (found by a marker in its environment) must then be gone
# within GONE_WITHIN s. On the parent of the reaper's commit the ranks
# stayed until torchrun killed them, 30 s later, or forever where
# torchrun was killed first; the helpers stayed.

CASE = '^CosmoFlow%scale=2_procs%launch_mode=torchrun'

#: Seconds from the end of reframe to the last process of its job.
GONE_WITHIN = 10


def marked(marker):
    '''PIDs of the running processes whose environment holds *marker*.'''
    found = []
    for entry in pathlib.Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / 'environ').read_bytes()
        except OSError:
            continue
        if marker in environ.split(b'\0') and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def as_a_users_session():
    '''In a session of its own (``setsid``), SIGINT as a terminal's Ctrl-C
    finds it (tests/test_sessions.py: as_in_a_terminal).'''
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def case_run(tmp_path, cache_dir):
    '''Start the case with *command* (``reframe`` or ``suite``) and
    *options*; returns (process, $REAP_TEST_DIR, marker), and ends what
    is left of it at the end of the test.'''
    stub = tmp_path / 'stub' / 'cosmoflow'
    stub.mkdir(parents=True)
    (stub / '__init__.py').write_text('')
    (stub / '__main__.py').write_text(RANK)
    ready = tmp_path / 'ready'
    ready.mkdir()
    marker = f'REAP_TEST_MARKER={uuid.uuid4()}'.encode()
    runs = []

    def run(command, *options):
        var = tmp_path / 'var'
        env = {**os.environ, 'HPCML_VAR_DIR': str(var),
               'HPCML_CACHE_DIR': str(cache_dir),
               'REAP_TEST_DIR': str(ready),
               'REAP_TEST_MARKER': marker.decode().split('=', 1)[1]}
        env.pop('RFM_CONFIG_FILES', None)
        head = ([str(BIN / 'reframe'), '-C', str(REPO / 'config/local.py'),
                 '-r'] if command == 'reframe' else [str(BIN / 'hpcml'),
                                                     'suite'])
        out = open(tmp_path / 'session.out', 'w+')
        proc = subprocess.Popen(
            [*head, '-c', str(REPO / 'checks/cosmoflow.py'), '-n', CASE,
             '-S', f'python_path={tmp_path / "stub"}', *options],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, preexec_fn=as_a_users_session)
        proc.output = out
        runs.append(proc)
        return proc, ready, marker

    yield run
    for proc in runs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    kill_all(marked(marker))


def left_running(marker, within):
    '''The processes whose environment holds *marker* still running
    after up to *within* s, each as "PID (parent PPID): command line".'''
    deadline = time.monotonic() + within
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    found = []
    for pid in marked(marker):
        try:
            stat = pathlib.Path(f'/proc/{pid}/stat').read_bytes()
            line = pathlib.Path(f'/proc/{pid}/cmdline').read_bytes()
        except OSError:
            continue
        parent = stat[stat.rfind(b')') + 2:].split()[1].decode()
        words = line.replace(b'\0', b' ').decode(errors='replace')
        found.append(f'{pid} (parent {parent}): {words[:120]}')
    return found


def output(proc):
    proc.output.seek(0)
    return proc.output.read()[-3000:]


@pytest.mark.integration
@pytest.mark.parametrize('command, signum', [
    ('reframe', signal.SIGTERM), ('reframe', signal.SIGINT),
    ('suite', signal.SIGTERM), ('suite', signal.SIGINT)])
def test_a_stopped_session_leaves_no_process_of_its_job(case_run, command,
                                                        signum):
    '''10-20 s each (5 s to the ranks on a quiet 2-core VM, the rest
    reframe's start and end). The signal goes to the process group of
    ``reframe`` or ``hpcml suite``, as ``kill -TERM -PGID`` or a
    terminal's Ctrl-C sends it.'''
    proc, ready, marker = case_run(command)
    started(ready, 4)
    os.killpg(proc.pid, signum)
    assert proc.wait(timeout=60) != 0
    assert 'ABORTED' in output(proc), output(proc)
    assert left_running(marker, GONE_WITHIN) == [], \
        f'left running {GONE_WITHIN} s after reframe ended'


@pytest.mark.integration
def test_a_case_at_its_time_limit_leaves_no_process_of_its_job(case_run):
    '''About 30 s: the time limit (25 s) is the cost. ReFrame's local
    scheduler sends the job's group SIGTERM at the limit, then SIGKILL.'''
    proc, ready, marker = case_run('suite', '-S', 'time_limit=25s')
    started(ready, 4, timeout=25)
    assert proc.wait(timeout=120) == 1
    assert 'job timed out' in output(proc), output(proc)
    assert left_running(marker, GONE_WITHIN) == [], \
        f'left running {GONE_WITHIN} s after reframe ended'


def test_a_stopped_process_ends_by_the_ending_signal(tmp_path):
    '''About 0.3 s. A process of the task stopped (SIGSTOP, a debugger,
    a hung rank the hang watch ends) cannot act on SIGTERM until it runs
    again: the reaper continues it (SIGCONT after the signal, as Slurm
    ends a step), so it ends by SIGTERM now, not by SIGKILL after the
    grace (5 s here).'''
    ready = tmp_path / 'stopped'
    proc = subprocess.Popen(
        reaper('sh', '-c', f'touch {ready}; kill -STOP $$'),
        env={**os.environ, 'HPCML_REAPER_GRACE': '5'})
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert time.monotonic() - started < 4
