"""Each rank's heartbeat for the hang watch (issue 43, section 2):
src/heartbeat.py, kept by every program (``fast_exit.run``)."""
import os
import subprocess
import sys
import time

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))
import heartbeat  # noqa: E402


def test_heartbeat_is_a_no_op_unwatched():
    '''A program run outside the suite (no HPCML_HANG_BEATS): nothing
    kept, nothing raised.'''
    heartbeat.start(env={})
    heartbeat.step()
    heartbeat.beat()
    assert heartbeat._state is None



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
