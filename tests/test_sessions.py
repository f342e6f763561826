"""Nothing lost: ReFrame sessions that overlap on one VAR_DIR, and sessions
stopped by Ctrl-C or SIGTERM, keep every result they wrote readable."""
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import BIN, REPO
from hpctestlib_ml import sessions
from hpctestlib_ml.report import history

pytestmark = pytest.mark.integration

COSMOFLOW = ('-c', REPO / 'checks/cosmoflow.py', '-n', '^CosmoFlow%')


def start(var, cache_dir, out, *args, command='reframe'):
    env = {**os.environ, 'HPCML_VAR_DIR': str(var),
           'HPCML_CACHE_DIR': str(cache_dir)}
    head = ([str(BIN / 'reframe'), '-C', str(REPO / 'config/local.py')]
            if command == 'reframe' else [str(BIN / 'hpcml'), 'suite'])
    return subprocess.Popen(
        [*head, *map(str, args), '-r'], cwd=var.parent, env=env, stdout=out,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        preexec_fn=as_in_a_terminal)


def as_in_a_terminal():
    '''SIGINT as a terminal's Ctrl-C finds it: a shell without job control
    starts background commands (`make test &` in a CI script) with SIGINT
    ignored, their children inherit that, and Python then installs no
    KeyboardInterrupt handler: the session would run on through the
    test's Ctrl-C.'''
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stored_sessions(db):
    with sqlite3.connect(db) as conn:
        assert conn.execute('PRAGMA integrity_check').fetchone() == ('ok',)
        return [json.loads(blob) for blob, in
                conn.execute('SELECT json_blob FROM sessions')]


#: On the first session's jobs' PYTHONPATH (-S python_path=): a job's
#: Python says it runs (held-PID beside this file) and waits there for
#: 'go' (10 minutes at most).
WAIT_FOR_GO = (
    'import os, pathlib, time\n'
    'where = pathlib.Path(__file__).parent\n'
    "pathlib.Path(where, f'held-{os.getpid()}').touch()\n"
    'deadline = time.monotonic() + 600\n'
    "while not (where / 'go').exists() and time.monotonic() < deadline:\n"
    '    time.sleep(0.1)\n')


def test_two_sessions_on_one_var_dir_run_apart(tmp_path, cache_dir):
    '''Two sessions at once, as two users or CI beside a manual run:
    every case of both passes, and the perflog and results DB hold all of
    them. The second starts once the first's job runs (its ReFrame holds
    the var directory), and that job waits until the second has said it
    stages apart: they overlap whatever the machine's speed. (Started
    2 s apart, the second could take the directory first where the
    first was slower to start, or find it free where the first was
    quick to end.) Over 30 s (about 50 s here): two sessions of
    CosmoFlow's three cases, the fewest that overlap.'''
    var = tmp_path / 'var'
    hold = tmp_path / 'hold'
    hold.mkdir()
    (hold / 'sitecustomize.py').write_text(WAIT_FOR_GO)
    outs = [open(tmp_path / f'session{i}.out', 'w+') for i in (1, 2)]
    first = start(var, cache_dir, outs[0], *COSMOFLOW,
                  '-S', f'python_path={hold}')
    second = None
    try:
        wait_for(lambda: list(hold.glob('held-*')), 'the first job',
                 first)
        second = start(var, cache_dir, outs[1], *COSMOFLOW)
        wait_for(lambda: 'hpcml: another ReFrame session' in
                 (outs[1].seek(0), outs[1].read())[1],
                 'the second session\'s note', second)
    finally:
        (hold / 'go').touch()
        if second is None:
            first.kill()
    assert first.wait(600) == 0 and second.wait(600) == 0, [
        (o.seek(0), o.read()[-2000:])[1] for o in outs]
    texts = [(o.seek(0), o.read())[1] for o in outs]
    for text in texts:
        assert 'Ran 3/3 test case(s)' in text and '0 failure(s)' in text
    notes = [line for line in texts[1].splitlines()
             if line.startswith('hpcml: another ReFrame session')]
    assert len(notes) == 1 and 'session-' in notes[0]
    assert not any(line.startswith('hpcml: another ReFrame session')
                   for line in texts[0].splitlines())
    assert list((var / 'output').glob('session-*/local/cpu/python/*'))

    data = history.read_perflogs([var / 'perflogs'])
    assert len(data.runs) == 6 and data.unreadable_lines == 0
    assert all(r.result == 'pass' for r in data.runs)
    stored = stored_sessions(var / 'results.db')
    assert len(stored) == 2
    assert [len(s['runs'][0]['testcases']) for s in stored] == [3, 3]


def wait_for(condition, what, proc, guard=900):
    '''Poll *condition* while *proc* runs. *guard* seconds bound a hang
    only: no wait here takes a minute, even at a load of 16.'''
    deadline = time.monotonic() + guard
    while not condition():
        assert proc.poll() is None, f'ended before {what}'
        assert time.monotonic() < deadline, f'no {what} in {guard} s'
        time.sleep(0.2)


def running(pid):
    '''Whether process *pid* runs (a zombie left to an init that does not
    reap it has ended).'''
    try:
        with open(f'/proc/{pid}/stat') as fp:
            return fp.read().rpartition(')')[2].split()[0] != 'Z'
    except OSError:
        return False


def second_case_started(text):
    '''The first case has passed and the second has started (ReFrame's
    ``RUN`` line after ``(1/3)``).'''
    _, found, after = text.partition('(1/3)')
    return bool(found) and 'RUN' in after


#: On the jobs' PYTHONPATH (-S python_path=): once the test has made
#: HOLD_DIR/hold, a job's Python waits there, saying so in a file, until
#: the session is stopped.
HOLDING = (
    'import os, pathlib, time\n'
    "where = os.environ.get('SESSION_TEST_HOLD_DIR')\n"
    "if where and pathlib.Path(where, 'hold').exists():\n"
    "    pathlib.Path(where, f'held-{os.getpid()}').touch()\n"
    '    time.sleep(900)\n')


@pytest.mark.parametrize('command, signum', [
    ('reframe', signal.SIGINT), ('reframe', signal.SIGTERM),
    # The bad-input rerun: SIGTERM to hpcml suite alone left ReFrame
    # running, holding its jobs.
    ('suite', signal.SIGTERM)])
def test_a_stopped_session_keeps_what_it_wrote(tmp_path, cache_dir, command,
                                               signum):
    '''The signal, sent to the command's process alone, lands inside the
    second case's job, whatever the machine's speed: the first case runs
    as it is and passes; then the jobs' Python holds (HOLDING) until the
    session is stopped. (It ran for 1000 steps of the first case before:
    11 s on a quiet VM, over its 300 s deadline at a load of 16.)'''
    var = tmp_path / 'var'
    out = open(tmp_path / 'session.out', 'w+')
    hold = tmp_path / 'hold_dir'
    hold.mkdir()
    (hold / 'sitecustomize.py').write_text(HOLDING)
    os.environ['SESSION_TEST_HOLD_DIR'] = str(hold)
    try:
        proc = start(var, cache_dir, out, *COSMOFLOW,
                     '--exec-policy=serial', '-S', f'python_path={hold}',
                     command=command)
    finally:
        del os.environ['SESSION_TEST_HOLD_DIR']
    try:
        deadline = time.monotonic() + 900
        while not second_case_started((out.seek(0), out.read())[1]):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        (hold / 'hold').touch()
        # The second case's job may have started its Python before the
        # hold and end as it is; the third's then holds.
        while not list(hold.glob('held-*')):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        proc.send_signal(signum)
        assert proc.wait(120) != 0
        # Nothing of the session is left: its ReFrame (whose command line
        # names the hold directory) and the held jobs. Signalled, they end
        # in moments; left running, they would hold for 900 s: waited for
        # up to 60 s, not a fixed second that a loaded machine may miss.
        def left():
            found = subprocess.run(['pgrep', '-f', f'python_path={hold}'],
                                   capture_output=True, text=True).stdout
            jobs = [held.name for held in hold.glob('held-*')
                    if running(int(held.name.split('-')[1]))]
            return found, jobs
        deadline = time.monotonic() + 60
        while left() != ('', []) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert left() == ('', []), f'left running: {left()}'
    finally:
        subprocess.run(['pkill', '-KILL', '-f', f'python_path={hold}'])
        for held in hold.glob('held-*'):
            try:
                os.kill(int(held.name.split('-')[1]), signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = (out.seek(0), out.read())[1]
    assert 'ABORTED' in text, text[-2000:]

    data = history.read_perflogs([var / 'perflogs'])
    assert len(data.runs) >= 1 and data.unreadable_lines == 0
    stored = stored_sessions(var / 'results.db')
    assert len(stored) == 1
    report = subprocess.run(
        [str(BIN / 'hpcml'), 'report', '--db', str(var / 'results.db')],
        capture_output=True, text=True, env={**os.environ,
                                             'HPCML_VAR_DIR': str(var)})
    assert 'cosmoflow' in report.stdout, report.stdout + report.stderr


def test_only_reframe_itself_takes_the_session_lock(tmp_path):
    var = str(tmp_path / 'var')
    assert sessions.session_dirs(var, in_session=False) == {}
    assert not (tmp_path / 'var').exists()
    assert sessions.session_dirs(var, in_session=True,
                                 user_chose=False) == {}
    assert (tmp_path / 'var' / sessions.LOCK_NAME).read_text() == \
        str(os.getpid())


def test_directories_the_user_chose_are_left_alone():
    chose = sessions._user_chose_dirs
    assert chose(['--stage=/s'], {}) and chose(['-o/out'], {})
    assert chose(['-r'], {'RFM_STAGE_DIR': '/s'})
    assert not chose(['-r', '-n', 'x', '-S', 'steps=4'], {})
    # A prefix is a var directory of the session's own: it is locked.
    assert not chose(['-r', '--prefix', '/p'], {})
    assert not chose(['-r'], {'RFM_PREFIX': '/p'})


def test_two_sessions_with_one_prefix_stage_apart(tmp_path):
    '''The bad-input rerun: two sessions given the same --prefix took
    no lock and staged into one directory (each cleans a test's stage
    directory before it uses it).'''
    import shutil
    if not shutil.which('flock'):
        pytest.skip('needs flock(1)')
    prefix = tmp_path / 'p'
    argv = ['-r', '--prefix', str(prefix)]
    prefix.mkdir()
    lock = prefix / sessions.LOCK_NAME
    # Another session holds the prefix's lock.
    holder = subprocess.Popen(['flock', str(lock), 'sleep', '60'])
    try:
        for _ in range(100):
            if subprocess.run(['flock', '-n', str(lock), 'true']).returncode:
                break
            time.sleep(0.1)
        dirs = sessions.session_dirs(str(tmp_path / 'var'), in_session=True,
                                     argv=argv, environ={})
    finally:
        holder.kill()
        holder.wait()
    assert dirs['stagedir'].startswith(f'{prefix}/stage/session-')
    assert dirs['outputdir'].startswith(f'{prefix}/output/session-')
    assert not (tmp_path / 'var').exists()


def test_an_unwritable_var_dir_names_the_fix(tmp_path):
    '''Rows 80-82: the var directory where nothing may be written (a
    file in the way here): one line, the directory and the fix.'''
    from hpctestlib_ml.paths import UnwritableDirError
    (tmp_path / 'file').write_text('x')
    with pytest.raises(UnwritableDirError) as err:
        sessions.claim_var_dir(str(tmp_path / 'file' / 'var'))
    assert str(err.value) == (
        f"cannot write in {tmp_path / 'file' / 'var'} (Not a directory): "
        'make it writable, or set HPCML_VAR_DIR (or give the session '
        '--prefix) to a directory you may write')
