"""Say in one line why a training job failed, from its output and state.

Causes are looked for in order, so that the root cause wins over its
consequences (a killed rank makes the others raise connection errors;
Slurm's time limit makes torchrun raise SignalException):

1. the scheduler ended the job: Slurm's ``*** JOB n ON node CANCELLED AT t
   DUE TO TIME LIMIT ***`` line (or the job state ReFrame polled);
2. the rank that failed first: srun's ``task N: Exited with exit code 1``
   or ``task N: Killed`` before srun began to end the step
   (``--kill-on-bad-exit``: ``Terminating StepId``), or torchrun's root
   cause block. Ranks that srun (or torchrun) stopped after it are its
   victims, not the cause. A rank that died by a signal is named with its
   signal, and for SIGABRT with what aborted it (NCCL's watchdog timeout, a
   C++ exception's ``what()``); a rank that exited with an error with its
   exception, its own (``[rankN]:``) where ranks are labelled, and not a
   peer-failure consequence (``Connection closed by peer``, NCCL's
   ``remote process exited``) where another exception was raised;
3. the last exception a rank raised;
4. else the last line of output.
"""
import collections
import re
import signal

_TRACEBACK = 'Traceback (most recent call last)'

# "RuntimeError: ...", "torch.distributed.DistBackendError: ...", possibly
# behind torchrun's "[rank0]: " label.
_EXCEPTION_LINE = re.compile(
    r'^(?:\[(?:rank|default)(\d+)\]:\s*)?'
    r'((?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit))'
    r'(?::.*)?)$', re.MULTILINE)

#: Exceptions that report another failure (torchrun's agent relaying a
#: worker's death or a signal it received), never the cause.
_RELAYED_EXCEPTIONS = {'ChildFailedError', 'SignalException'}

#: slurmstepd: "*** JOB 8 ON n1 CANCELLED AT 2026-11-22T00:34:19 DUE TO TIME
#: LIMIT ***". Not "*** STEP 8.0 ON n1 CANCELLED ...": srun cancels the step
#: itself when a rank fails (--kill-on-bad-exit).
_SLURM_CANCELLED = re.compile(
    r'\*\*\* JOB \S+ ON (\S+) CANCELLED AT (\S+)(?: DUE TO ([^*]+?))?'
    r'(?: \*\*\*|$)', re.MULTILINE)
_SLURM_OOM = re.compile(r'Detected \d+ oom[-_]kill event', re.IGNORECASE)

#: srun: a task's end, "srun: error: n2: task 1: Killed" or "srun: error:
#: n1: task 0: Exited with exit code 1" ("tasks 0-3" for several). Not
#: "Terminated": Slurm itself sends SIGTERM when it ends a step.
_SRUN_TASK_END = re.compile(
    r'^srun: error: (\S+): tasks? ([\d,\-]+): '
    r'(?:Exited with exit code (\d+)|(Killed|Segmentation fault|Aborted|'
    r'Bus error|Illegal instruction|Floating point exception))\s*$',
    re.MULTILINE)

#: srun begins to end the step (a task failed under --kill-on-bad-exit, or
#: srun got a signal): "srun: launch/slurm: _step_signal: Terminating
#: StepId=8.0" (Slurm 20.11+; "srun: Terminating StepId=..." by some),
#: "srun: Terminating job step 8.0" (older), or slurmstepd's "*** STEP 8.0
#: ON n1 CANCELLED AT ... ***". Tasks that end after it are srun's victims.
_SRUN_STEP_END = re.compile(
    r'^(?:srun: (?:launch/slurm: _step_signal: )?Terminating '
    r'(?:StepId=|job step )|\S*slurmstepd\S*: error: \*\*\* STEP )',
    re.MULTILINE)

#: torchrun's root cause block: "rank : 1 (local_rank: 0)" then
#: "exitcode : -9 (pid: 17727)  (SIGKILL)"; "host" between them.
_TORCHRUN_ROOT_CAUSE = re.compile(
    r'Root Cause \(first observed failure\):.*?'
    r'^\s*host\s*:\s*(\S+).*?'
    r'^\s*rank\s*:\s*(\d+).*?^\s*exitcode\s*:\s*(-?\d+)[^\n]*?'
    r'(?:\((SIG\w+)\))?$',
    re.MULTILINE | re.DOTALL)

#: Exception messages that report a peer's failure, not a cause: Gloo's and
#: NCCL's words for a rank that died or left.
_PEER_FAILURE = re.compile(
    r'Connection closed by peer|Connection reset by peer|Broken pipe|'
    r'remote process exited or there was a network error|'
    r'DistNetworkError|caused by a remote worker crashing|'
    r'NCCL communicator was aborted')

#: What aborted a rank (SIGABRT): PyTorch's NCCL watchdog ("[Rank 1]
#: Watchdog caught collective operation timeout: WorkNCCL(...) ran for
#: 600000 milliseconds before timing out."), else a C++ exception's
#: "  what():  ..." after "terminate called after throwing ...".
_WATCHDOG_TIMEOUT = re.compile(
    r'\[Rank (\d+)\] Watchdog caught collective operation timeout: '
    r'.*?before timing out\.')
_CXX_WHAT = re.compile(
    r'^terminate called after throwing an instance of .*\n\s*what\(\):\s*'
    r'(.+)$', re.MULTILINE)

#: One failed rank, as the launcher reported it at *pos* in the log: *kind*
#: ``signal`` (*detail*: srun's word, ``Killed``, or torchrun's (number,
#: name)) or ``exit`` (*detail*: the exit code); *source* ``srun`` or
#: ``torchrun``.
Failure = collections.namedtuple('Failure', 'pos rank node kind detail source')

JobEnd = collections.namedtuple('JobEnd', 'kind message')

#: Slurm job states (ReFrame's ``job.state``) that end a job from outside.
_STATE_ENDS = {
    'TIMEOUT': 'timeout',
    'CANCELLED': 'cancelled',
    'NODE_FAIL': 'node_fail',
    'OUT_OF_MEMORY': 'oom',
    'PREEMPTED': 'preempted',
    'DEADLINE': 'timeout',
}

_END_MESSAGES = {
    'timeout': 'Slurm ended the job at its time limit',
    'cancelled': 'the job was cancelled (scancel by a user, an admin or '
                 'ReFrame)',
    'node_fail': 'a node of the job failed (Slurm: NODE_FAIL)',
    'oom': 'a task ran out of memory (Slurm oom-kill)',
    'preempted': 'the job was preempted by Slurm',
}

_DUE_TO = {
    'TIME LIMIT': 'timeout',
    'NODE FAILURE': 'node_fail',
    'PREEMPTION': 'preempted',
}


def has_traceback(text):
    return _TRACEBACK in text


def job_end(text, state=None):
    '''A :class:`JobEnd` if the scheduler ended the job, else None.

    *state* is the job state ReFrame polled (``'TIMEOUT'``, ``'CANCELLED'``,
    ... or None); the log's slurmstepd line says it where the state is
    unknown (the ``squeue`` scheduler may miss a finished job).
    '''
    kind, detail = None, ''
    match = None
    for match in _SLURM_CANCELLED.finditer(text):
        pass
    if match:
        node, when, due = match.groups()
        kind = _DUE_TO.get((due or '').strip(), 'cancelled')
        detail = f' (slurmstepd on {node} at {when})'
    elif _SLURM_OOM.search(text):
        kind = 'oom'
    else:
        for name in (state or '').split(','):
            kind = _STATE_ENDS.get(name.strip().split(' ')[0])
            if kind:
                break

    if kind is None:
        return None
    return JobEnd(kind, _END_MESSAGES[kind] + detail)


def failures_in_order(text):
    '''Every rank failure srun or torchrun reported in *text*, in the
    order they appear.'''
    found = []
    for m in _SRUN_TASK_END.finditer(text):
        node, task, code, what = m.groups()
        if what:
            found.append(Failure(m.start(), task, node, 'signal', what,
                                 'srun'))
        elif int(code) != 0:
            found.append(Failure(m.start(), task, node, 'exit', int(code),
                                 'srun'))
    for m in _TORCHRUN_ROOT_CAUSE.finditer(text):
        host, rank, code, name = m.groups()
        code = int(code)
        if code < 0:
            found.append(Failure(m.start(), rank, host, 'signal',
                                 (-code, name), 'torchrun'))
        elif code > 0:
            found.append(Failure(m.start(), rank, host, 'exit', code,
                                 'torchrun'))
    return sorted(found, key=lambda failure: failure.pos)


def root_cause(text):
    '''The :class:`Failure` of the rank that failed first, or None: the
    first one reported before srun began to end the step (those after it
    are ranks srun stopped), else the first one.'''
    found = failures_in_order(text)
    if not found:
        return None
    step_end = _SRUN_STEP_END.search(text)
    before = [f for f in found if step_end is None or f.pos < step_end.start()]
    return (before or found)[0]


def abort_reason(text, rank=None):
    '''What aborted a rank (SIGABRT): NCCL's watchdog timeout, *rank*'s own
    where it printed one, else a C++ exception's ``what()``; None.'''
    timeouts = list(_WATCHDOG_TIMEOUT.finditer(text))
    if timeouts:
        own = [m for m in timeouts if m.group(1) == rank]
        return (own or timeouts)[0].group(0)
    match = _CXX_WHAT.search(text)
    return match.group(1).strip() if match else None


def signal_name(number):
    '''``SIGABRT`` for 6 (some torchrun versions print only the number).'''
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def signal_line(failure, text):
    '''"rank N ... was killed by SIGNAL" for a rank that died by a signal,
    with what aborted it for SIGABRT.'''
    if failure.source == 'torchrun':
        number, name = failure.detail
        name = name or signal_name(number)
        line = (f'rank {failure.rank} was killed by signal {number}'
                f'{f" ({name})" if name else ""}')
        aborted = number == 6
    else:
        line = (f'rank {failure.rank} on {failure.node} died: '
                f'{failure.detail} (srun)')
        aborted = failure.detail == 'Aborted'
    reason = abort_reason(text, failure.rank) if aborted else None
    return f'{line}: {reason}' if reason else line


def killed_rank(text):
    '''"rank N ... was killed by SIGNAL" if the rank that failed first died
    by a signal, else None.'''
    cause = root_cause(text)
    if cause and cause.kind == 'signal':
        return signal_line(cause, text)
    return None


def exception_line(text, rank=None):
    '''The last exception line of *text* that is not a relayed one nor, where
    another was raised, a peer's failure; *rank*'s own where the lines are
    labelled ``[rankN]:`` and it raised one.'''
    found = [(label, full) for label, full, name in
             _EXCEPTION_LINE.findall(text)
             if name not in _RELAYED_EXCEPTIONS]
    causes = [f for f in found if not _PEER_FAILURE.search(f[1])]
    found = causes or found
    own = [f for f in found if rank is not None and f[0] == rank]
    found = own or found
    return found[-1][1] if found else None


#: A program's own fatal message: argparse's ``prog: error: ...`` and the
#: suite's programs' ``prog: error: ...`` / ``prog: cannot ...``.
_PROGRAM_ERROR = re.compile(r'^[\w.-]+: (?:error: |cannot ).+$', re.M)


def program_error(text):
    '''The last fatal message a program printed itself, if any.'''
    lines = _PROGRAM_ERROR.findall(text)
    return lines[-1] if lines else None


def error_exit_line(failure, text):
    '''Why a rank that exited with an error did: its exception (or its
    program's own message), with the rank that exited first.'''
    line = exception_line(text, failure.rank) or program_error(text)
    where = f'rank {failure.rank}' + (f' on {failure.node}'
                                      if failure.node else '')
    if line is None:
        return f'{where} exited with code {failure.detail}'
    return f'{where} (exit code {failure.detail}): {line}'


def failure_line(text, state=None, limit=300):
    '''The most likely root cause of a failed run, in one line.'''
    end = job_end(text, state)
    cause = None if end else root_cause(text)
    if end:
        line = end.message
    elif cause and cause.kind == 'signal':
        line = signal_line(cause, text)
    elif cause:
        line = error_exit_line(cause, text)
    else:
        line = exception_line(text) or program_error(text)
    if line is None:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        line = lines[-1] if lines else '(no output)'

    line = line.strip()
    return line if len(line) <= limit else line[:limit] + '...'


def failure_reason(text, state=None, exitcode=None):
    '''Why the run failed, in one line, or None if nothing shows it did.

    A run failed if the scheduler ended it, it exited non-zero, a rank died
    by a signal or exited with an error, or a rank printed a traceback.
    '''
    if (job_end(text, state) or exitcode not in (0, None) or
            root_cause(text) or has_traceback(text)):
        return failure_line(text, state)

    return None
