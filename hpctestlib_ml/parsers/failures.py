"""Say in one line why a training job failed, from its output and state.

Causes are looked for in order, so that the root cause wins over its
consequences (a killed rank makes the others raise connection errors;
Slurm's time limit makes torchrun raise SignalException):

1. the scheduler ended the job: Slurm's ``*** JOB n ON node CANCELLED AT t
   DUE TO TIME LIMIT ***`` line (or the job state ReFrame polled);
2. a rank died by a signal: srun's ``task N: Killed`` or torchrun's
   ``exitcode : -9 ... (SIGKILL)`` root-cause block;
3. the last exception a rank raised;
4. else the last line of output.
"""
import collections
import re

_TRACEBACK = 'Traceback (most recent call last)'

# "RuntimeError: ...", "torch.distributed.DistBackendError: ...", possibly
# behind torchrun's "[rank0]: " label.
_EXCEPTION_LINE = re.compile(
    r'^(?:\[(?:rank|default)\d+\]:\s*)?'
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

#: srun: "srun: error: n2: task 1: Killed" (signals other than SIGTERM, which
#: Slurm itself sends when it ends a step).
_SRUN_TASK_SIGNALLED = re.compile(
    r'^srun: error: (\S+): tasks? ([\d,\-]+): '
    r'(Killed|Segmentation fault|Aborted|Bus error|Illegal instruction|'
    r'Floating point exception)', re.MULTILINE)

#: torchrun's root cause block: "rank : 1 (local_rank: 0)" then
#: "exitcode : -9 (pid: 17727)  (SIGKILL)".
_TORCHRUN_ROOT_CAUSE = re.compile(
    r'Root Cause \(first observed failure\):.*?'
    r'^\s*rank\s*:\s*(\d+).*?^\s*exitcode\s*:\s*(-?\d+)[^\n]*?(?:\((SIG\w+)\))?$',
    re.MULTILINE | re.DOTALL)

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


def killed_rank(text):
    '''"rank N ... was killed by SIGNAL" for the first rank that died by a
    signal, else None.'''
    match = _TORCHRUN_ROOT_CAUSE.search(text)
    if match and int(match.group(2)) < 0:
        rank, code, name = match.groups()
        return (f'rank {rank} was killed by signal {-int(code)}'
                f'{f" ({name})" if name else ""}')

    match = _SRUN_TASK_SIGNALLED.search(text)
    if match:
        node, task, what = match.groups()
        return f'rank {task} on {node} died: {what} (srun)'

    return None


def exception_line(text):
    '''The last exception line of *text* that is not a relayed one.'''
    lines = [full for full, name in _EXCEPTION_LINE.findall(text)
             if name not in _RELAYED_EXCEPTIONS]
    return lines[-1] if lines else None


#: A program's own fatal message: argparse's ``prog: error: ...`` and the
#: suite's programs' ``prog: error: ...`` / ``prog: cannot ...``.
_PROGRAM_ERROR = re.compile(r'^[\w.-]+: (?:error: |cannot ).+$', re.M)


def program_error(text):
    '''The last fatal message a program printed itself, if any.'''
    lines = _PROGRAM_ERROR.findall(text)
    return lines[-1] if lines else None


def failure_line(text, state=None, limit=300):
    '''The most likely root cause of a failed run, in one line.'''
    end = job_end(text, state)
    line = (end.message if end else None) or killed_rank(text) or \
        exception_line(text) or program_error(text)
    if line is None:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        line = lines[-1] if lines else '(no output)'

    line = line.strip()
    return line if len(line) <= limit else line[:limit] + '...'


def failure_reason(text, state=None, exitcode=None):
    '''Why the run failed, in one line, or None if nothing shows it did.

    A run failed if the scheduler ended it, it exited non-zero, a rank died
    by a signal, or a rank printed a traceback.
    '''
    if (job_end(text, state) or exitcode not in (0, None) or
            killed_rank(text) or has_traceback(text)):
        return failure_line(text, state)

    return None
