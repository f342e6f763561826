"""A full file system under the suite's var/ says so in one line
(hpctestlib_ml/var_full.py), not in a "--- Logging error ---" traceback
per log record: on /dev/full, whose every write fails with ENOSPC as a full
file system's does, through the logging handler ReFrame writes
``reframe.log`` with."""
import subprocess
import sys

#: 30 records to a RotatingFileHandler (ReFrame's ``file`` handler) on
#: /dev/full, the last also to stdout, with var_full installed or not
#: (argv: var dir, install?).
LOGGING_TO_DEV_FULL = '''
import logging, logging.handlers, sys
import reframe.core.logging          # ReFrame's own wrap of handleError
from hpctestlib_ml import var_full
if sys.argv[2] == 'install':
    var_full.install(sys.argv[1])
    var_full.install(sys.argv[1])    # a config loaded twice wraps once
log = logging.getLogger('hpcml-test')
log.propagate = False
log.addHandler(logging.handlers.RotatingFileHandler('/dev/full', mode='a+'))
for number in range(29):
    log.warning('record %d', number)
log.addHandler(logging.StreamHandler(sys.stdout))
log.warning('still logging')
'''


def log_to_dev_full(var_dir, install):
    return subprocess.run(
        [sys.executable, '-c', LOGGING_TO_DEV_FULL, str(var_dir),
         'install' if install else 'no'],
        capture_output=True, text=True, timeout=120)


def test_a_full_file_system_is_said_once_not_in_tracebacks(tmp_path):
    # Without it: Python's logging prints one traceback per record.
    proc = log_to_dev_full(tmp_path, install=False)
    assert proc.stderr.count('--- Logging error ---') == 30
    assert 'No space left on device' in proc.stderr

    proc = log_to_dev_full(tmp_path, install=True)
    assert proc.returncode == 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        "filesystem: the suite's var/ is full: cannot write /dev/full (No "
        "space left on device; file system /dev")
    assert (f'what earlier runs wrote in {tmp_path} (perflogs, results.db, '
            f'reports) is intact') in lines[0]
    assert lines[0].endswith('free space there or set HPCML_VAR_DIR to a '
                             'directory on another file system')
    # Logging goes on where it can.
    assert proc.stdout == 'still logging\n'


def test_other_logging_errors_keep_their_traceback(tmp_path):
    code = ('import logging, sys\n'
            'from hpctestlib_ml import var_full\n'
            f'var_full.install({str(tmp_path)!r})\n'
            'logging.getLogger().warning("%d", "not a number")\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=60)
    assert '--- Logging error ---' in proc.stderr
    assert 'var/ is full' not in proc.stderr
