"""One-line failure reasons, on logs captured from the suite's own Slurm
cluster (tests/slurm/cluster.sh) and this machine with the faults injected
for real, and on GPU faults as public issues show them (CUDA OOM, NCCL
errors, NCCL's watchdog), set in srun's and torchrun's lines as they print
them (tests/data/SOURCES.md, "Failures")."""
import pytest

from conftest import DATA, read_data
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
    # The rank torchrun names as the root cause comes first.
    text = read_data('open_clip', 'missing_pandas_torchrun.err')
    assert failures.failure_reason(text, exitcode=1) == (
        "rank 0 on localhost (exit code 1): "
        "clip_train: cannot import OpenCLIP (No module named 'pandas'); "
        "install it with `pip install 'open_clip_torch[training]'` or run in "
        "the suite's PyTorch container")


# A rank that raised, and the peers srun or torchrun then stopped

def test_torchrun_names_the_rank_that_raised_not_the_peers_gloo_error():
    # Captured here: 2 ranks of cosmoflow under torchrun, rank 1 raising in
    # its third optimizer step; rank 0 then fails in its all-reduce with
    # Gloo's "Connection closed by peer", printed after rank 1's error.
    text = read_data('failures', 'torchrun_rank1_raises_cpu.err')
    assert text.index('hpcml fault injection') < text.index(
        'Connection closed by peer')
    cause = failures.root_cause(text)
    assert (cause.rank, cause.kind, cause.detail) == ('1', 'exit', 1)
    assert failures.failure_reason(text, exitcode=1) == (
        'rank 1 on localhost (exit code 1): RuntimeError: hpcml fault '
        'injection: rank 1 raised in optimizer step 3')


#: A CUDA out-of-memory error as PyTorch 2.x prints it: pytorch/pytorch
#: issue #16417, comment of 2024-03-13 (a 24 GiB GPU).
CUDA_OOM = (
    'torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate '
    '22.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB '
    'is free. Including non-PyTorch memory, this process has 23.60 GiB '
    'memory in use. Of the allocated memory 22.90 GiB is allocated by '
    'PyTorch, and 194.87 MiB is reserved by PyTorch but unallocated. If '
    'reserved but unallocated memory is large try setting '
    'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid '
    'fragmentation.  See documentation for Memory Management  '
    '(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)')

#: NCCL failing in the rank where it failed (modelscope/ms-swift issue
#: #1233) and, as its peers report it, a rank that left (the message quoted
#: in pytorch/pytorch issue #111187, comment of 2024-03-19).
NCCL_SYSTEM_ERROR = (
    'torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/'
    'distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled system error (run '
    'with NCCL_DEBUG=INFO for details), NCCL version 2.18.6 ncclSystemError: '
    'System call (e.g. socket, malloc) or external library call failed or '
    'device error.')
NCCL_PEER_LEFT = (
    'torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/'
    'distributed/c10d/ProcessGroupNCCL.cpp:1691, remote process exited or '
    'there was a network error, NCCL version 2.19.3')


def per_task_run_then(*lines):
    '''The 2-rank per_task MMoCLIP run captured on the project's cluster up
    to its first step, then *lines*: what srun prints when a task exits
    with an error under --kill-on-bad-exit (the order of NERSC's srun in
    BLAST-WarpX/warpx PR #3400: "task 0: Exited with exit code 1", then
    "launch/slurm: _step_signal: Terminating StepId=..."; the step's end
    as in the captured log).'''
    text = slurm_log('rank_killed_per_task.err')
    head = text[:text.index('srun: error: n2: task 1: Killed')]
    return head + ''.join(line + '\n' for line in lines)


def test_srun_names_the_rank_that_ran_out_of_gpu_memory_not_its_killed_peer():
    text = per_task_run_then(
        CUDA_OOM,
        'srun: error: n2: task 1: Exited with exit code 1',
        'srun: launch/slurm: _step_signal: Terminating StepId=8.0',
        'slurmstepd-n1: error: *** STEP 8.0 ON n1 CANCELLED AT '
        '2026-11-22T00:46:28 ***',
        # Rank 0 did not end within KillWait of srun's SIGTERM.
        'srun: error: n1: task 0: Killed',
        'srun: Force Terminated StepId=8.0')
    assert failures.killed_rank(text) is None
    reason = failures.failure_reason(text, exitcode=1)
    assert reason.startswith('rank 1 on n2 (exit code 1): torch.cuda.'
                             'OutOfMemoryError: CUDA out of memory. Tried to '
                             'allocate 22.00 MiB. GPU 0 has a total capacity')
    # Cut at 300 characters at a word's end.
    assert reason.endswith('...') and len(reason) <= 303
    quoted = reason[:-3].split(': ', 1)[1]
    assert quoted + ' ' in text


def test_a_rank_killed_before_srun_ends_the_step_is_still_the_cause():
    # The captured per_task log: rank 1 killed, srun then ends rank 0.
    text = slurm_log('rank_killed_per_task.err')
    assert failures.root_cause(text).rank == '1'
    # Also with rank 0 raising Gloo's consequence and exiting 1 after the
    # step's end.
    text = per_task_run_then(
        'srun: error: n2: task 1: Killed',
        'srun: launch/slurm: _step_signal: Terminating StepId=8.0',
        'RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/'
        'tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:45740.',
        'srun: error: n1: task 0: Exited with exit code 1')
    assert failures.failure_reason(text, exitcode=1) == \
        'rank 1 on n2 died: Killed (srun)'


def nccl_error_then_peer_left():
    '''Rank 1's NCCL error under srun; rank 0's report that its peer left
    comes last, after srun ended it.'''
    return per_task_run_then(
        NCCL_SYSTEM_ERROR,
        'srun: error: n2: task 1: Exited with exit code 1',
        'srun: launch/slurm: _step_signal: Terminating StepId=8.0',
        NCCL_PEER_LEFT,
        'srun: error: n1: task 0: Exited with exit code 1')


def test_nccl_error_where_it_happened_wins_over_the_peers_report():
    text = nccl_error_then_peer_left()
    assert failures.failure_reason(text, exitcode=1) == failures.shorten(
        'rank 1 on n2 (exit code 1): ' + NCCL_SYSTEM_ERROR, 300)
    # The peers' report alone is still said.
    assert failures.exception_line(NCCL_PEER_LEFT) == NCCL_PEER_LEFT


def test_labelled_ranks_give_the_failed_ranks_own_exception():
    text = (f'[rank3]: {CUDA_OOM}\n'
            f'[rank0]: {NCCL_SYSTEM_ERROR}\n')
    assert failures.exception_line(text, rank='3') == CUDA_OOM
    assert failures.exception_line(text) == NCCL_SYSTEM_ERROR


# NCCL's watchdog: the rank aborts (SIGABRT) after printing why

#: huggingface/picotron_tutorial issue #6: 8 ranks under torchrun, NCCL's
#: watchdog timeout in ranks 2 and 3 (the first lines of the issue's log
#: that show it), and torchrun's root cause block (its last lines).
PICOTRON_WATCHDOG = [
    '[E ProcessGroupNCCL.cpp:915] [Rank 2] NCCL watchdog thread terminated '
    'with exception: [Rank 2] Watchdog caught collective operation timeout: '
    'WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, '
    'Timeout(ms)=120000) ran for 120822 milliseconds before timing out.',
    "terminate called after throwing an instance of 'std::runtime_error'",
    '  what():  [Rank 2] NCCL watchdog thread terminated with exception: '
    '[Rank 2] Watchdog caught collective operation timeout: '
    'WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, '
    'Timeout(ms)=120000) ran for 120822 milliseconds before timing out.',
    '[E ProcessGroupNCCL.cpp:488] Some NCCL operations have failed or timed '
    'out. Due to the asynchronous nature of CUDA kernels, subsequent GPU '
    'operations might run on corrupted/incomplete data.',
    '[E ProcessGroupNCCL.cpp:494] To avoid data inconsistency, we are taking '
    'the entire process down.',
    '[E ProcessGroupNCCL.cpp:915] [Rank 3] NCCL watchdog thread terminated '
    'with exception: [Rank 3] Watchdog caught collective operation timeout: '
    'WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, '
    'Timeout(ms)=120000) ran for 120823 milliseconds before timing out.',
    '-----------------------------------------------------',
    'Root Cause (first observed failure):',
    '[0]:',
    '  time      : 2025-05-01_11:12:35',
    '  host      : 472a4389fceb',
    '  rank      : 0 (local_rank: 0)',
    '  exitcode  : -6 (pid: 3431)',
    '  error_file: <N/A>',
    '  traceback : Signal 6 (SIGABRT) received by PID 3431',
    '=====================================================',
]


def test_watchdog_abort_under_torchrun_says_what_timed_out():
    text = '\n'.join(PICOTRON_WATCHDOG) + '\n'
    assert failures.failure_reason(text, exitcode=1) == (
        'rank 0 was killed by signal 6 (SIGABRT): [Rank 2] Watchdog caught '
        'collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, '
        'NumelIn=1, NumelOut=1, Timeout(ms)=120000) ran for 120822 '
        'milliseconds before timing out.')


def test_watchdog_abort_under_srun_names_the_ranks_own_timeout():
    # sgl-project/sglang issue #1693 (PyTorch 2.4's wording), as rank 5's
    # task under srun: srun reports SIGABRT as "Aborted".
    text = per_task_run_then(
        "terminate called after throwing an instance of "
        "'c10::DistBackendError'",
        '  what():  [PG 3 Rank 5] Process group watchdog thread terminated '
        'with exception: [Rank 5] Watchdog caught collective operation '
        'timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, '
        'NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600020 '
        'milliseconds before timing out.',
        'srun: error: n2: task 5: Aborted',
        'srun: launch/slurm: _step_signal: Terminating StepId=8.0',
        'srun: error: n1: tasks 0-4,6-7: Killed')
    assert failures.failure_reason(text, exitcode=1) == (
        'rank 5 on n2 died: Aborted (srun): [Rank 5] Watchdog caught '
        'collective operation timeout: WorkNCCL(SeqNum=9141, '
        'OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, '
        'Timeout(ms)=600000) ran for 600020 milliseconds before timing out.')


def test_older_srun_step_end_before_a_killed_peer():
    # Slurm before 20.11: "srun: Terminating job step N" (the first three
    # lines: hafs-community/HAFS issue #101, its second log); a peer then
    # killed by srun.
    text = ('srun: error: Orion-18-69: task 289: Bus error\n'
            'srun: Terminating job step 3495450.0\n'
            'slurmstepd: error: *** STEP 3495450.0 ON orion-01-04 CANCELLED '
            'AT 2021-10-27T20:22:22 ***\n'
            'srun: error: orion-01-04: task 0: Killed\n')
    assert failures.failure_reason(text) == \
        'rank 289 on Orion-18-69 died: Bus error (srun)'


#: PyTorch's abort on a CUDA fault (the two lines as in many public logs,
#: e.g. index id 62463627119), in a task srun saw abort.
ILLEGAL_ACCESS_ABORT = (
    "terminate called after throwing an instance of 'c10::Error'\n"
    '  what():  CUDA error: an illegal memory access was encountered\n'
    'srun: error: gpu07: task 3: Aborted\n'
    'srun: launch/slurm: _step_signal: Terminating StepId=8.0\n'
    'srun: error: gpu01: task 0: Killed\n')


def test_a_cxx_abort_is_said_by_its_what():
    text = ILLEGAL_ACCESS_ABORT
    assert failures.failure_reason(text) == (
        'rank 3 on gpu07 died: Aborted (srun): CUDA error: an illegal memory '
        'access was encountered')


# Root causes the parser read only in part before: public logs under
# tests/data/triage/public/ (tests/data/SOURCES.md, "Triage")

def public_log(name):
    return (DATA / 'triage' / 'public' / name).read_text(encoding='utf-8')


def test_srun_out_of_memory_names_the_task_and_its_node():
    # HAFS issue #101: slurmstepd's oom-kill event, then srun's task line.
    end = failures.job_end(public_log('hafs101_srun_oom_kill_task4.log'))
    assert (end.kind, end.rank, end.node) == ('oom', '4', 'Orion-01-01')
    assert end.message == ('a task ran out of memory (Slurm oom-kill): '
                           'rank 4 on Orion-01-01')
    end = failures.job_end(public_log('tusas149_srun_oom_kill_tasks1-3.log'))
    assert end.message.endswith('ranks 1-3 on nid001277')


def test_a_steps_time_limit_without_the_jobs_line():
    # Lightning issue #20542: only the step's CANCELLED line, DUE TO TIME
    # LIMIT, then the program's SIGTERM.
    end = failures.job_end(
        public_log('lightning20542_step_time_limit_sigterm.log'))
    assert (end.kind, end.node) == ('timeout', 'maestro-3017')


def test_job_requeue_is_the_schedulers_end_not_the_tasks_exit():
    text = public_log('submitit1708_slurm_job_requeue.log')
    assert 'tasks 2-3: Exited with exit code 1' in text
    assert failures.job_end(text).kind == 'requeued'
    assert failures.failure_reason(text).startswith(
        'Slurm requeued the job (preempted, or requeued by an admin)')


def test_a_step_cancelled_from_outside_is_the_schedulers_end():
    # IGNF/myria3d #123: the step's end, no failed task or srun ending
    # before it; srun's "task 0: Terminated" after it.
    end = failures.job_end(
        public_log('myria3d123_step_cancelled_task0_terminated.log'))
    assert (end.kind, end.node) == ('cancelled', 'DEL2212S020')
    # srun's own ending of the step after a failed task is not.
    assert failures.job_end(slurm_log('rank_killed_per_task.err')) is None


def test_torchruns_agent_line_where_the_root_cause_block_is_cut():
    text = public_log('robomamba10_torchrun_exitcode_minus9.log')
    assert 'Root Cause' not in text
    assert failures.failure_reason(text) == \
        'local rank 5 was killed by signal 9 (SIGKILL)'
    text = public_log('ccd13_missing_dataset_torchrun.log')
    assert failures.failure_reason(text) == (
        "local rank 0 (exit code 1): FileNotFoundError: [Errno 2] No such "
        "file or directory: '/data/gx/OCR-CC/data_lmdb/training/label/"
        "Synth/'")


def test_an_exception_whose_message_starts_on_the_next_line():
    text = public_log('fastfcn37_nvidia_driver_too_old.log')
    assert failures.exception_line(text) == (
        'AssertionError: The NVIDIA driver on your system is too old (found '
        'version 9000).')


def test_a_node_failure_whose_line_goes_on():
    # Slurm 23+: "... DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"
    # (the words of slurmstepd's node-failure cancel, as sites' docs quote
    # them).
    text = ('slurmstepd: error: *** JOB 8 ON n1 CANCELLED AT '
            '2026-11-22T00:34:19 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR '
            'DETAILS ***\n')
    assert failures.job_end(text).kind == 'node_fail'


@pytest.mark.parametrize('limit, line, said', [
    (7, 'abc def ghi', 'abc def...'),
    (9, 'abc def ghi', 'abc def...'),
    (5, 'abcdefghij', 'abcde...'),
    (7, 'abc def', 'abc def'),
])
def test_a_long_reason_is_cut_at_a_words_end(limit, line, said):
    assert failures.shorten(line, limit) == said


def test_a_bare_exception_is_the_cause():
    '''Megatron-Core raises bare Exception; that line is the cause, not
    the output's last line.'''
    text = ('[rank0]: Traceback (most recent call last):\n'
            "[rank0]:     raise Exception('cuda rng state')\n"
            '[rank0]: Exception: cuda rng state model-parallel-rng is not '
            'added\n[rank0]:[W1126 destroy_process_group() was not called\n')
    assert failures.failure_line(text) == (
        'Exception: cuda rng state model-parallel-rng is not added')
