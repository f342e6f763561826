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
   exception, its own where ranks are labelled (``[rankN]:``, ``N:``,
   ...: :mod:`~hpctestlib_ml.parsers.labels`), and not a
   peer-failure consequence (``Connection closed by peer``, NCCL's
   ``remote process exited``) where another exception was raised;
3. the last exception a rank raised;
4. else the last line of output.
"""
import collections
import re
import signal

from hpctestlib_ml.parsers import labels

_TRACEBACK = 'Traceback (most recent call last)'

# "RuntimeError: ...", "torch.distributed.DistBackendError: ...", a bare
# "Exception: ..." (Megatron-Core raises those), possibly behind
# launchers' labels (torchrun's "[rank0]: ", srun's "0: ", ...).
_EXCEPTION_LINE = re.compile(
    r'^(?:(?P<labels>' + labels.PREFIX + r')\s*)?'
    r'(?P<line>(?:[A-Za-z_][\w]*\.)*'
    r'(?P<name>[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)|Exception)'
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

#: A step's end that names why: "*** STEP 55595933.0 ON maestro-3017
#: CANCELLED AT 2025-01-10T15:27:25 DUE TO TIME LIMIT ***" (a job log that
#: holds only the step's line: Lightning-AI/pytorch-lightning issue #20542).
#: Without "DUE TO" a step's end is srun's own, not the scheduler's.
_SLURM_STEP_DUE = re.compile(
    r'\*\*\* STEP \S+ ON (\S+) CANCELLED AT (\S+) DUE TO ([^*]+?)'
    r'(?: \*\*\*|$)', re.MULTILINE)
_SLURM_OOM = re.compile(r'Detected \d+ oom[-_]kill event', re.IGNORECASE)
#: Slurm's own memory enforcement (jobacct_gather) ending a job or a step,
#: the usage and the limit in its words: "slurmstepd: error: Job 7518
#: exceeded memory limit (626359956 > 512000000), being killed", then
#: "slurmstepd: error: Exceeded job memory limit" and the job's CANCELLED
#: line (coqui-ai/STT issue #2238, a training run); "Step 1141810.0
#: exceeded memory limit (...), being killed" and srun's "srun: Exceeded job
#: memory limit" (openbabel/openbabel issue #2658). Not "Exceeded job
#: memory limit at some point.": a step that went over and went on
#: (galaxyproject/galaxy, lib/galaxy/jobs/runners/slurm.py).
_SLURM_MEMORY_LIMIT = re.compile(
    r'\b(?:Job|Step) \S+ exceeded memory limit \(\d+ > \d+\), being killed|'
    r'Exceeded (?:job|step) memory limit(?! at some point)')

#: A step's end that says no why: "*** STEP 6053.0 ON DEL2212S020
#: CANCELLED AT 2024-04-23T12:18:08 ***" (IGNF/myria3d issue #123, behind a
#: progress bar). srun's own when a task failed or srun began to end the
#: step before it (:data:`_SRUN_TERMINATING`), else a cancel from outside
#: (``scancel`` of the step).
_SLURM_STEP_CANCELLED = re.compile(
    r'\*\*\* STEP \S+ ON (\S+) CANCELLED AT (\S+) \*\*\*')
#: srun on a node lost under the step: "srun: error: Node failure on
#: jean-zay-iam37" (huggingface/m4-logs, tr_141's Jean Zay runs), before
#: slurmstepd's "... DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"
#: from another node, or without it.
_SRUN_NODE_FAILURE = re.compile(r'^srun: error: Node failure on (\S+)',
                                re.MULTILINE)
_SRUN_TERMINATING = re.compile(
    r'^srun: (?:launch/slurm: _step_signal: )?Terminating', re.MULTILINE)

#: srun's word for a task the cgroup's OOM killer ended: "srun: error:
#: Orion-01-01: task 4: Out Of Memory" (hafs-community/HAFS issue #101),
#: "srun: error: nid001277: tasks 1-3: Out Of Memory".
_SRUN_TASK_OOM = re.compile(
    r'^srun: error: (\S+): tasks? ([\d,\-]+): Out Of Memory\s*$', re.MULTILINE)

#: srun: a task's end, "srun: error: n2: task 1: Killed" or "srun: error:
#: n1: task 0: Exited with exit code 1" ("tasks 0-3" for several). Not
#: "Terminated": Slurm itself sends SIGTERM when it ends a step.
_SRUN_TASK_END = re.compile(
    r'^srun: error: (\S+): tasks? ([\d,\-]+): '
    r'(?:Exited with exit code (\d+)|(Killed|Segmentation fault|Aborted|'
    r'Bus error|Illegal instruction|Floating point exception|'
    r'Out Of Memory))\s*$',
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

#: torchrun's agent on a worker's end, where its root cause block is not
#: in the log (cut, or the agent died): "E0325 20:57:27.620000 2606
#: .../multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 5
#: (pid: 2630) of binary: ..." (lmzpai/roboMamba issue #10); older torch
#: "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)
#: local_rank: 0 (pid: ...)". The rank is the node's local one.
_TORCHRUN_AGENT_FAILED = re.compile(
    r'failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: \d+\)')

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

#: How the scheduler ended a job: *kind* (``timeout``, ``cancelled``,
#: ``node_fail``, ``oom``, ``preempted``, ``requeued``), the one-line
#: *message*, and the *node* and *rank* (srun's task) where the log names
#: them.
JobEnd = collections.namedtuple('JobEnd', 'kind message node rank',
                                defaults=(None, None))

#: Slurm job states (ReFrame's ``job.state``) that end a job from outside.
_STATE_ENDS = {
    'TIMEOUT': 'timeout',
    'CANCELLED': 'cancelled',
    'NODE_FAIL': 'node_fail',
    'OUT_OF_MEMORY': 'oom',
    'PREEMPTED': 'preempted',
    'DEADLINE': 'timeout',
    'BOOT_FAIL': 'node_fail',
    'REQUEUED': 'requeued',
}

_END_MESSAGES = {
    'timeout': 'Slurm ended the job at its time limit',
    'cancelled': 'the job was cancelled (scancel by a user, an admin or '
                 'ReFrame)',
    'node_fail': 'a node of the job failed (Slurm: NODE_FAIL)',
    'oom': 'a task ran out of memory (Slurm oom-kill)',
    'preempted': 'the job was preempted by Slurm',
    'requeued': 'Slurm requeued the job (preempted, or requeued by an '
                'admin)',
}

_DUE_TO = {
    'TIME LIMIT': 'timeout',
    'NODE FAILURE': 'node_fail',
    'PREEMPTION': 'preempted',
    'JOB REQUEUE': 'requeued',
}


def has_traceback(text):
    return _TRACEBACK in text


def job_end(text, state=None):
    '''A :class:`JobEnd` if the scheduler ended the job, else None.

    *state* is the job state ReFrame polled (``'TIMEOUT'``, ``'CANCELLED'``,
    ... or None); the log's slurmstepd line says it where the state is
    unknown (the ``squeue`` scheduler may miss a finished job): the job's
    ``CANCELLED`` line, else a step's that says why (``DUE TO ...``; a
    failed node named as srun names it), else srun's node failure, else
    Slurm's end of a task out of memory (:func:`memory_end`), else a step
    cancelled from outside. A job cancelled with no reason given after a
    task ran out of memory is that task's end (Slurm cancels the job at
    its memory limit).
    '''
    match = _last(_SLURM_CANCELLED, text) or _last(_SLURM_STEP_DUE, text)
    lost = _SRUN_NODE_FAILURE.search(text)
    memory = memory_end(text)
    if match:
        node, when, due = match.groups()
        kind = _due_to(due)
        where = f'slurmstepd on {node} at {when}'
        if kind == 'cancelled' and memory:
            return memory._replace(message=f'{memory.message} ({where})',
                                   node=memory.node or node)
        if kind == 'node_fail' and lost and lost.group(1) != node:
            return JobEnd(kind, f'{_END_MESSAGES[kind]}: {lost.group(1)} '
                                f'({where})', lost.group(1))
        return JobEnd(kind, f'{_END_MESSAGES[kind]} ({where})', node)
    if lost:
        return JobEnd('node_fail', f'{_END_MESSAGES["node_fail"]}: '
                                   f'{lost.group(1)} (srun)', lost.group(1))
    if memory:
        step = _SLURM_STEP_CANCELLED.search(text)
        if step and memory.node is None:
            node, when = step.groups()
            return memory._replace(
                message=f'{memory.message} (slurmstepd on {node} at {when})',
                node=memory.node or node)
        return memory
    step = _step_cancelled_from_outside(text)
    if step:
        node, when = step.groups()
        return JobEnd('cancelled', f"{_END_MESSAGES['cancelled']} (its step,"
                                   f" slurmstepd on {node} at {when})", node)
    for name in (state or '').split(','):
        kind = _STATE_ENDS.get(name.strip().split(' ')[0])
        if kind:
            return JobEnd(kind, _END_MESSAGES[kind])
    return None


def memory_end(text):
    '''A :class:`JobEnd` of kind ``oom`` where Slurm ended a task out of
    memory: the cgroup's oom-kill event, srun's "task N: Out Of Memory"
    (the task named), or Slurm's memory enforcement, with the usage and
    the limit as it gives them (:data:`_SLURM_MEMORY_LIMIT`); None.'''
    task = _SRUN_TASK_OOM.search(text)
    limit = (_SLURM_MEMORY_LIMIT.search(text) if 'memory limit' in text
             else None)
    if not (task or limit or _SLURM_OOM.search(text)):
        return None
    node = rank = None
    if limit and not task and not _SLURM_OOM.search(text):
        return JobEnd('oom', f'Slurm ended the run at its memory limit: '
                             f'{limit.group(0)}')
    message = _END_MESSAGES['oom']
    if task:
        node, rank = task.groups()
        ranks = 'ranks' if set(rank) & set(',-') else 'rank'
        message += f': {ranks} {rank} on {node}'
    if limit:
        message += f'; {limit.group(0)}'
    return JobEnd('oom', message, node, rank)


def _due_to(due):
    '''The kind of a slurmstepd line's "DUE TO ..." (*due*, None for
    none): its words may go on ("DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR
    DETAILS"); ``cancelled`` where it names no kind known.'''
    due = (due or '').strip()
    return next((kind for words, kind in _DUE_TO.items()
                 if due.startswith(words)), 'cancelled')


def _step_cancelled_from_outside(text):
    '''The match of a step's end (:data:`_SLURM_STEP_CANCELLED`) that no
    failed task nor srun's own ending came before; None.'''
    step = _SLURM_STEP_CANCELLED.search(text)
    if step is None:
        return None
    before = text[:step.start()]
    if _SRUN_TERMINATING.search(before) or failures_in_order(before):
        return None
    return step


def _last(pattern, text):
    '''The last match of *pattern* in *text*, or None.'''
    match = None
    for match in pattern.finditer(text):
        pass
    return match


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
        found.append(_exit_failure(m.start(), rank, host, int(code), name,
                                   'torchrun'))
    if not _TORCHRUN_ROOT_CAUSE.search(text):
        found += agent_failures(text)
    return sorted((f for f in found if f), key=lambda failure: failure.pos)


def _exit_failure(pos, rank, node, code, name, source):
    '''The :class:`Failure` of a worker torchrun saw end with *code* (a
    signal's number negated, its *name* where torchrun gave it); None for
    0.'''
    if code < 0:
        return Failure(pos, rank, node, 'signal', (-code, name), source)
    if code > 0:
        return Failure(pos, rank, node, 'exit', code, source)
    return None


def agent_failures(text):
    '''The workers torchrun's agent saw fail (its "failed (exitcode: N)
    local_rank: R" line), for a log without its root cause block: source
    ``torchrun-agent``, the rank a local one, the node unknown.'''
    return [_exit_failure(m.start(), m.group(2), None, int(m.group(1)), None,
                          'torchrun-agent')
            for m in _TORCHRUN_AGENT_FAILED.finditer(text)]


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
    if failure.source != 'srun':
        number, name = failure.detail
        name = name or signal_name(number)
        line = (f'{rank_words(failure)} was killed by signal {number}'
                f'{f" ({name})" if name else ""}')
        aborted = number == 6
    else:
        line = (f'rank {failure.rank} on {failure.node} died: '
                f'{failure.detail} (srun)')
        aborted = failure.detail == 'Aborted'
    reason = abort_reason(text, failure.rank) if aborted else None
    return f'{line}: {reason}' if reason else line


def rank_words(failure):
    '''"rank 1", or "local rank 5" where only torchrun's agent named it.'''
    local = 'local ' if failure.source == 'torchrun-agent' else ''
    return f'{local}rank {failure.rank}'


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
    labelled ``[rankN]:`` and it raised one. An exception whose message
    starts on the next line (PyTorch's ``AssertionError:`` of a driver too
    old) is said with that line.'''
    found = [m for m in _EXCEPTION_LINE.finditer(text)
             if m.group('name') not in _RELAYED_EXCEPTIONS]
    causes = [m for m in found if not _PEER_FAILURE.search(m.group('line'))]
    found = causes or found
    own = [m for m in found if rank is not None and
           labels.rank_of(m.group('labels') or '') == rank]
    found = own or found
    if not found:
        return None
    line = found[-1].group('line')
    if line.rstrip().endswith(':'):
        following = [ln.strip() for ln in text[found[-1].end():].splitlines()
                     if ln.strip()]
        if following:
            line = f'{line.rstrip()} {following[0]}'
    return line


#: A program's own fatal message: argparse's ``prog: error: ...`` and the
#: suite's programs' ``prog: error: ...`` / ``prog: cannot ...``; not the
#: launcher's and Slurm's lines of the same shape (``srun: error: n1: task
#: 0: Terminated``, ``slurmstepd-n1: error: ***``), which say what became
#: of a rank, not why.
_PROGRAM_ERROR = re.compile(
    r'^(?!(?:srun|salloc|sbatch|slurmstepd)\b)[\w.-]+: (?:error: |cannot )'
    r'.+$', re.M)


def program_error(text):
    '''The last fatal message a program printed itself, if any.'''
    lines = _PROGRAM_ERROR.findall(text)
    return lines[-1] if lines else None


def error_exit_line(failure, text):
    '''Why a rank that exited with an error did: its exception (or its
    program's own message), with the rank that exited first.'''
    line = exception_line(text, failure.rank) or program_error(text)
    where = rank_words(failure) + (f' on {failure.node}'
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

    return shorten(line, limit)


def shorten(line, limit=300):
    '''*line* stripped, cut to at most *limit* characters at a word's end,
    with "..." where it was cut (a reason never ends mid-word).'''
    line = line.strip()
    if len(line) <= limit:
        return line
    cut = line[:limit]
    if not line[limit].isspace() and ' ' in cut:
        cut = cut.rsplit(' ', 1)[0]
    return cut.rstrip(' ,;:') + '...'


def failure_reason(text, state=None, exitcode=None):
    '''Why the run failed, in one line, or None if nothing shows it did.

    A run failed if the scheduler ended it, it exited non-zero, a rank died
    by a signal or exited with an error, or a rank printed a traceback.
    '''
    if (job_end(text, state) or exitcode not in (0, None) or
            root_cause(text) or has_traceback(text)):
        return failure_line(text, state)

    return None
