"""src/fast_exit.py: the programs' exit status, output and atexit handlers
are those of ``sys.exit(main())``; only the interpreter's teardown (freeing
every object) is skipped."""
import subprocess
import sys

import pytest

from hpctestlib_ml.paths import REPO_ROOT

PROGRAM = '''
import atexit, sys
import fast_exit

class Noisy:
    def __del__(self):
        sys.stderr.write('freed at teardown\\n')

keep = Noisy()
atexit.register(lambda: print('atexit ran'))

def main():
    print('args', sys.argv[1:], end=' ')  # left in the buffer
    {body}

fast_exit.run(main{teardown})
'''


def run(body, *args, env=None, teardown=''):
    code = PROGRAM.format(body=body, teardown=teardown)
    return subprocess.run(
        [sys.executable, '-c', code, *args], capture_output=True, text=True,
        env={'PYTHONPATH': str(REPO_ROOT / 'src'), **(env or {})})


@pytest.mark.parametrize('body, status, message', [
    ('return None', 0, ''),
    ('return 3', 3, ''),
    ('sys.exit(4)', 4, ''),
    ("sys.exit('error: no data in /x: pass --data')", 1,
     'error: no data in /x: pass --data'),
])
def test_status_output_and_atexit_as_sys_exit(body, status, message):
    proc = run(body, '--', '--steps', '2')
    assert proc.returncode == status
    # torchrun's separator is dropped; buffered output and atexit kept.
    assert proc.stdout == "args ['--steps', '2'] atexit ran\n"
    assert proc.stderr.strip() == message


def test_teardown_skipped_unless_asked():
    assert 'freed at teardown' not in run('return 0').stderr
    for asked in ({'env': {'HPCML_FULL_EXIT': '1'}}, {'teardown': ', True'}):
        proc = run('return 0', **asked)
        assert proc.returncode == 0
        assert 'freed at teardown' in proc.stderr
        assert proc.stdout.endswith('atexit ran\n')


def test_exception_leaves_with_its_traceback():
    proc = run("raise ValueError('bad batch size')")
    assert proc.returncode == 1
    assert 'ValueError: bad batch size' in proc.stderr
    assert 'Traceback' in proc.stderr
