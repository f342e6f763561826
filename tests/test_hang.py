"""The hang watch (issue 43, section 2): each rank's heartbeat
(src/heartbeat.py), the watch in each task's reaper (src/hang_watch.py)
and the line that names the rank that stopped where the others wait
(src/hang_report.py).

The ranks here are small standard-library programs that keep a
heartbeat as the suite's programs do (``fast_exit.run``), run under the
reaper as every task is: they step, then stop in a function of their own,
in a DataLoader whose dataset never returns, or by SIGSTOP; or they run
healthy with a slow first step and an evaluation between the steps. The
suite's own programs are held to the same watch on the local partition
(test_reframe_local.py) and on the Slurm cluster
(test_reframe_slurm.py)."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import BIN, REPO

sys.path.insert(0, str(REPO / 'src'))
import hang_report  # noqa: E402
import hang_watch  # noqa: E402
import heartbeat  # noqa: E402

REAPER = REPO / 'src' / 'reaper.py'

#: A rank: a slow first step (compilation) of $FIRST_S, then $STEPS steps
#: of $STEP_S, an evaluation of $EVAL (20) beats of $STEP_S after the
#: fifth, then
#: it stops as $STOP says: ``function`` (sleeps in stuck_here()),
#: ``loader`` (a DataLoader whose dataset never returns), ``sigstop``
#: (stops itself), or nothing (it ends, status 0).
RANK = '''
import os, signal, sys, time
import fast_exit, heartbeat


def stuck_here():
    time.sleep(600)


class Forever:
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(600)


def main():
    env = os.environ
    stop = env.get('STOP')
    if stop == 'loader':
        import torch.utils.data
        heartbeat.watch_torch()
    time.sleep(float(env.get('FIRST_S', 0)))
    heartbeat.step()
    for n in range(int(env.get('STEPS', 10))):
        time.sleep(float(env.get('STEP_S', 0.05)))
        heartbeat.step()
        if n == 4:
            for _ in range(int(env.get('EVAL', 20))):
                time.sleep(float(env.get('STEP_S', 0.05)))
                heartbeat.beat()
    if stop == 'function':
        stuck_here()
    elif stop == 'loader':
        next(iter(torch.utils.data.DataLoader(Forever())))
    elif stop == 'sigstop':
        os.kill(os.getpid(), signal.SIGSTOP)
    return 0


fast_exit.run(main)
'''


@pytest.fixture
def rank_program(tmp_path):
    program = tmp_path / 'rank.py'
    program.write_text(RANK)
    return program


def watched(tmp_path, program, *args, python=sys.executable, bound='1',
            timeout=60, path=None, **env):
    '''Run *program* (a Python program, or a command with *args*) as rank
    0 of 1 under the reaper with the hang watch (bound *bound* s);
    (completed process, seconds it took, the hang directory).'''
    hang_dir = tmp_path / 'hpcml_hang'
    full = {**os.environ, 'HPCML_HANG_DIR': str(hang_dir),
            'HPCML_HANG_BOUND_S': bound, 'RANK': '0', 'WORLD_SIZE': '1',
            'PYTHONPATH': str(REPO / 'src'), 'OMP_NUM_THREADS': '1',
            'HPCML_REAPER_GRACE': '0.5', **env}
    if path is not None:
        full['PATH'] = path
    start = time.monotonic()
    command = [program, *args] if args else [python, program]
    proc = subprocess.run([python, '-S', str(REAPER), *map(str, command)],
                          env=full, capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)
    return proc, time.monotonic() - start, hang_dir


def hang_line(stderr):
    lines = [ln for ln in stderr.splitlines()
             if ln.startswith(hang_watch.LINE)]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0][len(hang_watch.LINE):]


def test_a_rank_stopped_in_its_code_is_named_and_ended(tmp_path,
                                                       rank_program):
    '''About 4 s: the bound past the last step (10 mean steps, 1.5 s: the
    evaluation between two steps counts in their mean; the floor is 1 s),
    the stacks, then SIGTERM. The line names the rank, its step and the
    function it stopped in; its stack is kept.'''
    proc, took, hang_dir = watched(tmp_path, rank_program, STOP='function')
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-3000:]
    line = hang_line(proc.stderr)
    assert re.fullmatch(
        r"rank 0 on \S+ stopped at step 11 in rank.py:7 stuck_here; no rank "
        r"advanced for [\d.]+ s \(bound 1.5 s\); who acts: the user \(the "
        r"program's code\); stacks in hpcml_hang/", line), line
    stack = (hang_dir / 'rank0.stack.txt').read_text()
    assert 'in stuck_here' in stack and 'stack from faulthandler' in stack
    report = json.loads((hang_dir / 'rank0.json').read_text())
    assert (report['steps'], report['beats'], report['state']) == \
        (11, 31, 'S')
    assert took < 20, took


def test_a_dead_data_loader_is_the_user_s(tmp_path, rank_program):
    '''5-10 s (torch's import, before the first step: an import of
    seconds after it is no step, and longer than this test's bound). A
    DataLoader whose dataset never returns: the rank stopped in the data
    loader, at the dataset's own line.'''
    proc, _, _ = watched(tmp_path, rank_program, STOP='loader')
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-3000:]
    line = hang_line(proc.stderr)
    assert ' stopped at step 11 in the data loader (rank.py:15 ' \
        '__getitem__);' in line, line
    assert 'who acts: the user (the data loader)' in line, line


def without_py_spy():
    '''(a Python with no py-spy beside it, a PATH without py-spy).'''
    python = getattr(sys, '_base_executable', sys.executable)
    path = ':'.join(p for p in os.environ.get('PATH', '').split(':')
                    if not os.path.exists(os.path.join(p, 'py-spy')))
    if os.path.exists(os.path.join(os.path.dirname(python), 'py-spy')):
        pytest.skip(f'py-spy is installed beside {python}')
    return python, path


@pytest.mark.parametrize('spy', [True, False], ids=['py-spy', 'no-py-spy'])
def test_a_stopped_rank_is_the_node_s(tmp_path, rank_program, spy):
    '''About 3 s each. A rank stopped by SIGSTOP cannot run its
    faulthandler: its process state says it is stopped, and where py-spy
    is installed (``py-spy dump --nonblocking``) its stack says where.'''
    if spy:
        if hang_watch.py_spy() is None:
            pytest.skip('py-spy is not installed (pip install py-spy)')
        python, path = sys.executable, None
    else:
        python, path = without_py_spy()
    try:
        proc, _, hang_dir = watched(tmp_path, rank_program, python=python,
                                    path=path, STOP='sigstop')
    finally:
        for report in tmp_path.glob('hpcml_hang/rank*.json'):
            pid = json.loads(report.read_text())['pid']
            with pytest.raises(OSError):    # gone: the reaper killed it
                os.kill(pid, signal.SIGCONT)
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-3000:]
    line = hang_line(proc.stderr)
    stopped = ' stopped at step 11: its process is stopped (state T: ' \
        'SIGSTOP or a debugger)'
    assert stopped in line, line
    assert 'who acts: the operators (the node: ' in line, line
    stack = (hang_dir / 'rank0.stack.txt').read_text()
    if spy:
        assert re.search(rf'{re.escape(stopped)}, in rank.py:\d+ main;',
                         line), line
        assert 'stack from py-spy' in stack, stack
    else:
        assert f'{stopped};' in line, line
        assert 'stack from None' in stack, stack


def test_a_healthy_run_is_never_a_hang(tmp_path, rank_program):
    '''About 6 s. A first step of 2 s (compilation: the watch is not
    armed before it), steps of 0.3 s against a floor of 1 s (the bound
    is 10 steps, 3 s), an evaluation of 5 beats between two steps: no
    hang, the run's own status, and nothing in the hang directory.'''
    proc, _, hang_dir = watched(tmp_path, rank_program, FIRST_S='2',
                                STEP_S='0.3', STEPS='6', EVAL='5')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'hpcml hang' not in proc.stderr
    assert not hang_dir.exists()


def test_a_launcher_that_outlives_its_ranks_is_no_hang(tmp_path,
                                                     rank_program):
    '''About 5 s. The ranks ended, their launcher still ends (torchrun's
    teardown, 3 s here, past the 1 s bound): the heartbeats of ranks that
    have exited are no hang. 14 of the first 29 runs of bench/
    hang_bench.py at a 2 s floor were ended so before this.'''
    launcher = tmp_path / 'launcher.sh'
    launcher.write_text(f'{sys.executable} {rank_program} && sleep 3\n')
    proc, _, hang_dir = watched(tmp_path, 'sh', launcher, STEP_S='0.01',
                                EVAL='0')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'hpcml hang' not in proc.stderr
    assert not hang_dir.exists()


def test_no_watch_without_its_settings(tmp_path, rank_program):
    '''About 4 s. The reaper without HPCML_HANG_DIR, or with a bound of
    0, watches nothing: the stopped rank runs on, twice as long as the
    watch would have let it (its steps end within 0.5 s; bound 1 s).'''
    runs = [subprocess.Popen(
        [sys.executable, '-S', str(REAPER), sys.executable,
         str(rank_program)], cwd=tmp_path, stderr=subprocess.PIPE,
        env={**os.environ, 'HPCML_HANG_DIR': str(tmp_path / 'hpcml_hang'),
             'HPCML_HANG_BOUND_S': '1', 'PYTHONPATH': str(REPO / 'src'),
             'STEP_S': '0.01', 'EVAL': '0', 'STOP': 'function', **env})
        for env in ({'HPCML_HANG_DIR': ''}, {'HPCML_HANG_BOUND_S': '0'})]
    time.sleep(4)
    for proc in runs:
        assert proc.poll() is None
        proc.terminate()
        assert proc.wait(timeout=30) == -signal.SIGTERM
        assert b'hpcml hang' not in proc.stderr.read()
    assert not (tmp_path / 'hpcml_hang').exists()


def test_heartbeat_is_a_no_op_unwatched():
    '''A program run outside the suite (no HPCML_HANG_BEATS): nothing
    kept, nothing raised.'''
    heartbeat.start(env={})
    heartbeat.step()
    heartbeat.beat()
    assert heartbeat._state is None


def test_the_bound_is_ten_steps_or_the_floor():
    record = {'steps': 11, 'first_step': 100.0, 'previous_step': 145.0,
              'last_step': 150.0}
    assert hang_watch.bound([record], 120) == 120
    assert hang_watch.bound([record], 20) == 50          # 10 x 5 s
    # Only the first step: no pace yet.
    assert hang_watch.bound([{**record, 'steps': 1}], 20) == 20
    # Steps that grow (the Collectives' sizes, each twice the last): ten
    # of the last, not of their mean, which a step twice the last would
    # pass at the largest sizes.
    growing = {'steps': 11, 'first_step': 0.0, 'previous_step': 51.2,
               'last_step': 102.4}
    assert hang_watch.bound([growing], 1) == 512
    # The slowest rank's pace.
    assert hang_watch.bound([record, growing], 1) == 512


# The line, from reports as the watch writes them.

TORCH = '/venv/lib/python3.11/site-packages/torch'
WAITS_IN_ALL_REDUCE = [(f'{TORCH}/distributed/distributed_c10d.py', 2501,
                        'all_reduce'),
                       (f'{TORCH}/distributed/c10d_logger.py', 83,
                        'wrapper'),
                       ('/repo/src/collectives/__main__.py', 75, 'run_op')]
WAITS_IN_BACKWARD = [(f'{TORCH}/autograd/graph.py', 1072,
                      '_engine_run_backward'),
                     ('/repo/src/mlperf_train/__init__.py', 216, 'step')]
SLEEPS_IN_WRAPPER = [('/tmp/inject/sitecustomize.py', 12, 'all_reduce'),
                     ('/repo/src/collectives/__main__.py', 75, 'run_op')]


def report(rank, node, frames, steps=57, state='S'):
    return {'rank': rank, 'node': node, 'frames': frames, 'steps': steps,
            'state': state}


def test_the_line_names_the_rank_others_wait_for():
    reports = [report(0, 'n1', WAITS_IN_ALL_REDUCE),
               report(1, 'n1', WAITS_IN_ALL_REDUCE),
               report(2, 'n1', WAITS_IN_ALL_REDUCE),
               report(3, 'n2', SLEEPS_IN_WRAPPER)]
    assert hang_report.summary(reports, 4, 131.2, 120) == (
        'rank 3 on n2 stopped at step 57 in all_reduce (sitecustomize.py:12 '
        'all_reduce); ranks 0-2 wait in all_reduce; no rank advanced for '
        '131 s (bound 120 s); who acts: the operators (a collective stuck '
        'on n2)')


def test_a_stopped_process_a_missing_report_and_a_level_wait():
    stopped = [report(0, 'n1', WAITS_IN_BACKWARD),
               report(1, 'n2', [], state='T')]
    # Read by py-spy: where the stopped process was.
    assert hang_report.describe(report(1, 'n2', WAITS_IN_BACKWARD,
                                       state='T')) == (
        'stopped', 'its process is stopped (state T: SIGSTOP or a debugger), '
        'in backward')
    assert hang_report.summary(stopped, 3, 21, 20) == (
        'rank 1 on n2 stopped at step 57: its process is stopped (state T: '
        'SIGSTOP or a debugger); rank 0 on n1 waits in backward; no report '
        'from rank 2; no rank advanced for 21 s (bound 20 s); who acts: the '
        'operators (the node: n2)')
    level = [report(r, 'n1', WAITS_IN_ALL_REDUCE) for r in range(4)]
    assert hang_report.summary(level, 4, 30, 20).startswith(
        'ranks 0-3 wait in all_reduce at step 57; no rank advanced')
    assert 'who acts: the operators (a collective stuck: the network or a ' \
        'node)' in hang_report.summary(level, 4, 30, 20)
    behind = level[:3] + [report(3, 'n2', WAITS_IN_ALL_REDUCE, steps=56)]
    assert hang_report.summary(behind, 4, 30, 20).startswith(
        'rank 3 on n2 stopped at step 56 in all_reduce; ranks 0-2 wait in '
        'all_reduce;')


def test_rank_lists_and_the_line_s_length():
    assert hang_report.ranks_text([3]) == 'rank 3'
    assert hang_report.ranks_text([0, 1, 2, 5, 7, 8]) == 'ranks 0-2, 5, 7-8'
    many = [report(r, f'node{r:04d}', [(f'/src/m{r}.py', r, f'f{r}')])
            for r in range(64)]
    line = hang_report.summary(many, 64, 200, 120)
    assert len(line) <= hang_report.LIMIT and '...' in line
    assert line.endswith("who acts: the user (the program's code)")


def test_stacks_are_read_from_faulthandler_and_py_spy():
    faulthandler = '''Thread 0x00007f2b3a7fe640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f2b4f2a9b80 (most recent call first):
  File "/repo/src/mlperf_train/__init__.py", line 216 in step
  File "/repo/src/cosmoflow/__main__.py", line 208 in <module>
  File "<frozen runpy>", line 198 in _run_module_as_main
'''
    assert hang_report.main_frames(faulthandler) == [
        ('/repo/src/mlperf_train/__init__.py', 216, 'step'),
        ('/repo/src/cosmoflow/__main__.py', 208, '<module>'),
        ('<frozen runpy>', 198, '_run_module_as_main')]
    spy = '''Process 4242: python -m cosmoflow
Python v3.11.7 (/usr/bin/python3.11)

Thread 4250 (idle): "pt_autograd_0"
    wait (/usr/lib/python3.11/threading.py:320)
Thread 4242 (idle): "MainThread"
    stuck_here (/tmp/rank.py:7)
    main (/tmp/rank.py:40)
'''
    assert hang_report.main_frames(spy, 4242) == [
        ('/tmp/rank.py', 7, 'stuck_here'), ('/tmp/rank.py', 40, 'main')]
    assert hang_report.short(('/repo/src/cosmoflow/__main__.py', 208,
                              'main')) == 'cosmoflow/__main__.py:208 main'


def test_the_heartbeat_s_record_and_stack(tmp_path):
    '''About 0.2 s: the record as the watch reads it, and the stack on
    the dump signal.'''
    code = ('import os, sys, time, heartbeat\n'
            'heartbeat.start()\n'
            'heartbeat.step(); heartbeat.beat(); heartbeat.step()\n'
            'print("ready", flush=True)\n'
            'def waiting():\n'
            '    time.sleep(30)\n'
            'waiting()\n')
    proc = subprocess.Popen(
        [sys.executable, '-c', code], stdout=subprocess.PIPE, text=True,
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src'), 'RANK': '3',
             'WORLD_SIZE': '4', heartbeat.BEATS_DIR: str(tmp_path)})
    try:
        assert proc.stdout.readline() == 'ready\n'
        record = heartbeat.read(tmp_path / 'rank3.beat')
        assert {k: record[k] for k in ('pid', 'rank', 'world', 'beats',
                                       'steps')} == \
            {'pid': proc.pid, 'rank': 3, 'world': 4, 'beats': 3, 'steps': 2}
        assert record['first_step'] <= record['last_step'] == record['last']
        deadline = time.monotonic() + 10
        stack = tmp_path / 'rank3.stack'
        while 'in waiting' not in stack.read_text():    # once it waits
            assert time.monotonic() < deadline, stack.read_text()
            os.kill(proc.pid, heartbeat.DUMP_SIGNAL)
            time.sleep(0.1)
        assert proc.poll() is None          # the dump does not end it
    finally:
        proc.kill()
        proc.wait()


def test_megatron_lm_s_own_script_is_watched(tmp_path):
    '''5-11 s (torch's import). ``gpt_pretrain --megatron-lm DIR``
    runs upstream's pretrain_gpt.py, which prints no device record (where
    the suite's PyTorch programs start the watch of their optimizer): its
    optimizer steps are the rank's steps all the same.'''
    checkout = tmp_path / 'Megatron-LM'
    checkout.mkdir()
    (checkout / 'pretrain_gpt.py').write_text(
        'import torch\n'
        'p = torch.nn.Parameter(torch.ones(2))\n'
        'opt = torch.optim.SGD([p], lr=0.1)\n'
        'for _ in range(3):\n'
        '    p.sum().backward()\n'
        '    opt.step()\n')
    beats = tmp_path / 'beats'
    beats.mkdir()
    subprocess.run([sys.executable, '-m', 'gpt_pretrain', '--megatron-lm',
                    str(checkout)], check=True, timeout=120,
                   env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
                        heartbeat.BEATS_DIR: str(beats)})
    assert heartbeat.read(beats / 'rank0.beat')['steps'] == 3


# The suite's own program on the local partition: a 2-rank CosmoFlow under
# torchrun whose rank 1 sleeps as it takes its sixth batch, from outside
# the suite's code (a sitecustomize.py on -S python_path=).

STALLED_BATCH = '''
import os
import sys
import time

if os.environ.get('RANK') == '1' and 'cosmoflow' in sys.orig_argv:
    import mlperf_train

    _next = mlperf_train.Batches.__next__
    _calls = [0]

    def stalled_next(self):
        _calls[0] += 1
        if _calls[0] == 6:
            time.sleep(3600)
        return _next(self)

    mlperf_train.Batches.__next__ = stalled_next
'''


@pytest.mark.integration
def test_a_local_case_that_hangs_is_named_and_ended(run_reframe, tmp_path):
    '''35 s on a quiet VM, 80 s on a loaded one (reframe, torchrun's
    start, five steps, the 5 s bound): the local partition's own launch.
    The case fails as a hang, naming rank 1 where it stopped and rank 0
    waiting in DDP's backward, long before its time limit (2 minutes: a
    case the watch missed would fail as ``scheduler``); both stacks are
    kept beside the job's output, and ``hpcml triage`` of the job's
    output says the same.'''
    inject = tmp_path / 'inject'
    inject.mkdir()
    (inject / 'sitecustomize.py').write_text(STALLED_BATCH)
    proc, var = run_reframe(
        BIN / 'reframe', '-C', REPO / 'config/local.py', '-c',
        REPO / 'checks/cosmoflow.py', '-n',
        '^CosmoFlow%scale=2_procs%launch_mode=torchrun', '-r', '-S',
        f'python_path={inject}', '-S', 'steps=200', '-S', 'hang_bound_s=5',
        '-S', 'time_limit=2m', timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]
    line, = re.findall(r'\* Reason: (.*)', proc.stdout)
    assert re.fullmatch(
        r'sanity error: hang: rank 1 on \S+ stopped at step 5 in '
        r'sitecustomize.py:\d+ stalled_next; rank 0 on \S+ waits in '
        r'backward; no rank advanced for [\d.]+ s \(bound 5.0 s\); who acts: '
        r"the user \(the program's code\); stacks in hpcml_hang/", line), line
    hang_dir, = (var / 'stage').rglob('hpcml_hang')
    assert 'in stalled_next' in (hang_dir / 'rank1.stack.txt').read_text()
    assert 'in _engine_run_backward' in \
        (hang_dir / 'rank0.stack.txt').read_text()
    err = hang_dir.parent / 'rfm_job.err'
    found = subprocess.run([BIN / 'hpcml', 'triage', err],
                           capture_output=True, text=True, timeout=60)
    assert json.loads(found.stdout)['category'] == 'hang', found.stdout
