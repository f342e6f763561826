"""A full file system under the suite's var/ says so in one line
(hpctestlib_ml/var_full.py), not in a "--- Logging error ---" traceback
per log record: on /dev/full, whose every write fails with ENOSPC as a full
file system's does, through the logging handler ReFrame writes
``reframe.log`` with."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BIN

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


# For real: the suite's var/ on a full tmpfs

#: One tiny case, the brief's: CosmoFlow, one rank, launched per task.
TINY_CASE = '^CosmoFlow%scale=1_proc%launch_mode=per_task'

#: Inside its own mount namespace (so the mount goes with it): a 64 MiB
#: tmpfs at $1 holding var/; a first run writes its results there; the
#: rest of the file system is then filled; a second run finds it full.
#: Each run's stdout and stderr, and copies of the results before and
#: after the second run, land in $2.
FULL_TMPFS_SCRIPT = r'''
set -u
mnt=$1 out=$2 hpcml=$3 case=$4
mount -t tmpfs -o size=64m tmpfs "$mnt" || exit 97
export HPCML_VAR_DIR="$mnt/var" HPCML_POLL_RATE_MIN=4
"$hpcml" suite -n "$case" >"$out/first.out" 2>"$out/first.err"
echo $? >"$out/first.rc"
mkdir "$out/before" && cp -a "$mnt/var/perflogs" "$mnt/var/results.db" \
  "$mnt/var/reports" "$out/before/"
dd if=/dev/zero of="$mnt/fill" bs=64k 2>/dev/null
dd if=/dev/zero of="$mnt/fill-rest" bs=512 2>/dev/null
df -k "$mnt" >"$out/df.txt"
"$hpcml" suite -n "$case" >"$out/second.out" 2>"$out/second.err"
echo $? >"$out/second.rc"
mkdir "$out/after" && cp -a "$mnt/var/perflogs" "$mnt/var/results.db" \
  "$mnt/var/reports" "$out/after/"
'''


def run_on_full_tmpfs(tmp_path, cache_dir):
    '''Run FULL_TMPFS_SCRIPT as root in a mount namespace of its own; skip
    (fail under CI) where that cannot be done. Returns the outputs dir.'''
    why = None
    if os.geteuid() != 0:
        why = 'not root: cannot mount a tmpfs'
    elif not shutil.which('unshare'):
        why = 'no unshare(1)'
    else:
        probe = subprocess.run(['unshare', '--mount', 'true'],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            why = f'unshare --mount: {probe.stderr.strip()}'
    if why:
        if os.environ.get('CI'):
            pytest.fail(f'a full tmpfs cannot be made under CI: {why}')
        pytest.skip(why)
    mnt, out = tmp_path / 'mnt', tmp_path / 'out'
    mnt.mkdir()
    out.mkdir()
    env = {**os.environ, 'HPCML_CACHE_DIR': str(cache_dir)}
    env.pop('RFM_CONFIG_FILES', None)
    proc = subprocess.run(
        ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
         FULL_TMPFS_SCRIPT, 'full-tmpfs', str(mnt), str(out),
         str(BIN / 'hpcml'), TINY_CASE],
        capture_output=True, text=True, timeout=1500, env=env,
        cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode != 97, f'mount failed: {proc.stderr}'
    return out


@pytest.mark.integration
def test_a_case_on_a_full_var_says_so_in_one_line(tmp_path, cache_dir):
    out = run_on_full_tmpfs(tmp_path, cache_dir)
    read = lambda name: (out / name).read_text()
    assert read('first.rc').strip() == '0', read('first.out')[-3000:]
    second = read('second.out') + read('second.err')
    print(read('df.txt'), second[-4000:], sep='\n')
    assert read('second.rc').strip() != '0'
    # The suite's own output has no logging traceback: those left are the
    # training program's own, in the job's stderr ReFrame shows.
    head = read('second.out').split('--- rfm_job.err')[0]
    assert '--- Logging error ---' not in head + read('second.err')
    lines = [ln for ln in second.splitlines() if 'var/ is full' in ln]
    assert len(lines) == 1, second[-4000:]
    assert lines[0].startswith("filesystem: the suite's var/ is full: "
                               f"cannot write {out.parent / 'mnt' / 'var'}")
    assert 'is intact' in lines[0] and 'HPCML_VAR_DIR' in lines[0]
    # Not a traceback of the suite's own logging, at exit neither.
    assert 'Traceback' not in read('second.err'), read('second.err')
    # The case says why, its category first.
    assert re.search(r'\* Reason: sanity error: filesystem: job failed '
                     r'\(exit code 1\): OSError: \[Errno 28\] No space left '
                     r'on device', second)
    assert_intact(out / 'before', out / 'after')


def assert_intact(before, after):
    '''What the first run wrote (*before*) is still there, byte for byte,
    at the start of each file (*after*): the second run may only have
    appended.'''
    files = [p for p in before.rglob('*') if p.is_file()]
    assert any(p.suffix == '.log' for p in files)
    for old in files:
        new = (after / old.relative_to(before)).read_bytes()
        assert new.startswith(old.read_bytes()), old
