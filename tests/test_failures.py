"""One-line failure reasons, on logs captured from the suite's own Slurm
cluster (tests/slurm/cluster.sh) with the faults injected for real."""
import pytest

from conftest import read_data
from hpctestlib_ml.parsers import failures


def slurm_log(name):
    return read_data('slurm', name)


def test_rank_killed_under_srun_names_the_rank_not_the_peer_error():
    text = slurm_log('rank_killed_per_task.err')
    # srun --kill-on-bad-exit=1 then cancelled the step and terminated
    # rank 0: consequences, not the cause.
    assert '*** STEP 8.0 ON n1 CANCELLED AT' in text
    assert 'task 0: Terminated' in text
    assert failures.job_end(text) is None
    assert failures.killed_rank(text) == 'rank 1 on n2 died: Killed (srun)'
    assert failures.failure_reason(text) == 'rank 1 on n2 died: Killed (srun)'


def test_rank_killed_under_torchrun_reads_the_root_cause_block():
    text = slurm_log('rank_killed_torchrun.err')
    assert failures.killed_rank(text) == ('rank 1 was killed by signal 9 '
                                          '(SIGKILL)')
    assert failures.failure_reason(text, state='FAILED', exitcode=1) == \
        'rank 1 was killed by signal 9 (SIGKILL)'


def test_time_limit_is_reported_as_such():
    text = slurm_log('time_limit_per_task.err')
    end = failures.job_end(text)
    assert end.kind == 'timeout'
    assert end.message == ('Slurm ended the job at its time limit '
                           '(slurmstepd on n1 at 2026-11-22T00:34:19)')
    # srun's "task 0: Terminated" is Slurm ending the step, not a crash.
    assert failures.killed_rank(text) is None
    assert failures.failure_reason(text).startswith('Slurm ended the job at '
                                                    'its time limit')


def test_scancel_is_reported_not_the_agents_signal_exception():
    text = slurm_log('scancel_torchrun.err')
    assert 'SignalException' in text
    assert failures.job_end(text).kind == 'cancelled'
    assert failures.failure_reason(text).startswith(
        'the job was cancelled (scancel by a user, an admin or ReFrame) '
        '(slurmstepd on n1 at 2026-11-22T')


@pytest.mark.parametrize('state, kind', [
    ('TIMEOUT', 'timeout'), ('CANCELLED', 'cancelled'),
    ('CANCELLED by 0', 'cancelled'), ('NODE_FAIL', 'node_fail'),
    ('OUT_OF_MEMORY', 'oom'), ('COMPLETED', None), ('FAILED', None),
    (None, None),
])
def test_job_state_alone_says_how_the_scheduler_ended_it(state, kind):
    end = failures.job_end('', state)
    assert (end.kind if end else None) == kind


@pytest.mark.parametrize('name', [
    'cpu_1rank_torchrun.err', 'cpu_2ranks_torchrun.err',
    'slurm_2nodes_torchrun.err', 'slurm_2procs_srun.err',
])
def test_good_runs_show_no_failure(name):
    text = read_data('open_clip', name)
    assert failures.failure_reason(text, state='COMPLETED', exitcode=0) is None


def test_exit_code_alone_fails_with_the_last_line():
    assert failures.failure_reason('starting\nsomething odd\n', exitcode=3) \
        == 'something odd'
    assert failures.failure_reason('', exitcode=3) == '(no output)'


def test_exception_line_skips_relayed_exceptions():
    text = ('[rank1]: ValueError: bad shape\n'
            'torch.distributed.elastic.multiprocessing.errors.'
            'ChildFailedError: \n')
    assert failures.exception_line(text) == 'ValueError: bad shape'


def test_a_programs_own_error_behind_torchruns_report():
    # clip_train exits with its message; torchrun then raises
    # ChildFailedError and prints its root-cause block of '=' lines.
    text = read_data('open_clip', 'missing_pandas_torchrun.err')
    assert failures.failure_reason(text, exitcode=1) == (
        "clip_train: cannot import OpenCLIP (No module named 'pandas'); "
        "install it with `pip install 'open_clip_torch[training]'` or run in "
        "the suite's PyTorch container")
