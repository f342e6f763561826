"""The evidence triage weighs: causes by nature (a GPU's own errors, the
hang watch, Slurm's refusal, the scheduler's end of the job), an error
line stronger than a collective's failure, a non-finite loss, a wrong
answer."""
import re

from hpctestlib_ml import answers
from hpctestlib_ml.parsers import failures
from hpctestlib_ml.triage.patterns import (CONSEQUENCES, END_CATEGORIES,
                                           HARDWARE, NUMERICS, ORDER)
from hpctestlib_ml.triage.lines import (REASON_LIMIT, Triage, _error_lines,
                                        _excerpt, _nccl_words, _trim, _where,
                                        classify, problems_category, step_of)

#: The loss scaler's floor: the minimum loss scale of Megatron-LM
#: (``--min-loss-scale``) and DeepSpeed (``min_loss_scale``) by default. A
#: scaler that reduces the scale to it or below keeps overflowing.
MIN_LOSS_SCALE = 1.0
_SCALE_AT_MINIMUM = re.compile(r'loss scale already at minimum')
_LOSS_SCALE_DOWN = re.compile(
    r'(?:reducing loss scale to|Attempted loss scale: \S+, reducing to) '
    r'([0-9.eE+-]+)')


def wrong_answer(text):
    '''The :class:`Triage` of a log whose ranks' answers show a wrong one
    or cannot be compared (:func:`hpctestlib_ml.answers.log_verdict`),
    naming the rank and node where one rank alone is suspect; None
    otherwise.'''
    found = answers.log_verdict(text)
    if found is None or not found.problems:
        return None
    rank, node = (found.suspects[0] if len(found.suspects) == 1
                  else (None, None))
    return Triage(problems_category(found.problems),
                  _trim('; '.join(found.problems)),
                  None if rank is None else str(rank), node)


def by_nature(text, state=None):
    '''A :class:`Triage` from evidence that is a cause wherever it stands:
    a GPU's own error (:data:`HARDWARE`: the first Xid a GPU raised, or
    an ECC or lost-GPU line), else the hang watch's line (:func:`hang`),
    else Slurm's refusal of the job (it never ran: what the tool that
    submitted it printed after is its consequence), else the scheduler's
    end of the job; None.'''
    lines = [ln.strip() for ln in text.splitlines()
             if any(p.search(ln) for p in HARDWARE)]
    if lines:
        line = _first_cause_xid(lines)
        where = [_where(ln, failures.root_cause(text), text) for ln in lines]
        rank = next((r for r, _ in where if r), None)
        node = next((n for _, n in where if n), None)
        return Triage('hardware', _trim(line), rank, node)
    hung = hang(text)
    if hung:
        return hung
    refused = submission_refused(text)
    if refused:
        return refused
    end = failures.job_end(text, state)
    if end:
        return Triage(END_CATEGORIES[end.kind], end.message, end.rank,
                      end.node)
    return None


#: The hang watch's lines on the job's standard error (``src/hang_watch.
#: py``): ``hpcml hang: <the rank that stopped where, where the others
#: wait, who acts>`` once it has every rank's report, and before it,
#: ``hpcml hang watch: no rank on n1 advanced for 131 s (bound 120 s):
#: recording stacks in ...`` (all a log has where the job was killed in
#: between).
_HANG = re.compile(r'^hpcml hang(?: watch)?: (.*)$', re.M)
#: The first rank the line names as stopped, and its node.
_HANG_RANK = re.compile(r'\brank (\d+) on ([\w.-]+) stopped\b')


def hang(text):
    '''A ``hang`` :class:`Triage` from the hang watch's last summary line
    in *text* (else its first notice), with the first rank it names as
    stopped and that rank's node; None where the watch said nothing.'''
    lines = _HANG.findall(text)
    if not lines:
        return None
    summaries = [m.group(1) for m in _HANG.finditer(text)
                 if not m.group(0).startswith('hpcml hang watch: ')]
    reason = summaries[-1] if summaries else lines[0]
    named = _HANG_RANK.search(reason) if summaries else None
    return Triage('hang', _trim(reason), *(named.groups() if named else
                                           (None, None)))


#: Slurm's refusals of a job at submission and the option each is about:
#: (words of the refusal, option). "sbatch: error: invalid partition
#: specified: gpu-v100-32GB" then "Batch job submission failed: Invalid
#: partition name specified" (AaltoSciComp/scicomp-docs PR #792), "Invalid
#: --time specification" (nservant/HiC-Pro #645), "Requested time limit is
#: invalid (missing or exceeds some limit)" (NVIDIA-NeMo/RL PR #3051),
#: "Memory specification can not be satisfied" then "Requested node
#: configuration is not available" (PennLINC/babs #195), "Invalid qos
#: specification" (aidenlab/juicer #143), "Invalid account or
#: account/partition combination specified" (ArjunaCluster/ArjunaUsers #17).
SUBMISSION_REFUSED = (
    ('account', '--account'),
    ('partition', '--partition'),
    ('time', '--time'),
    ('qos', '--qos'),
    ('Memory specification', '--mem'),
    ('Node count', '--nodes'),
    ('node configuration', '--nodes, --gres, --mem or --constraint'),
    ('accounting/QOS policy', '--time, --nodes or --qos'),
)
_SLURM_REFUSAL = re.compile(r'^(?:sbatch|salloc|srun)(?:\.bin)?: error: ')


def submission_refused(text):
    '''A ``bad_input`` :class:`Triage` where Slurm refused the job (its
    first refusal line, :data:`BAD_INPUT`), naming the option to fix
    (:data:`SUBMISSION_REFUSED`); None.'''
    if 'error: ' not in text:
        return None
    for line in text.splitlines():
        line = line.strip()
        if _SLURM_REFUSAL.match(line) and classify(line) == 'bad_input':
            option = next((o for words, o in SUBMISSION_REFUSED
                           if words in line), None)
            fix = f' (Slurm refused the job: fix {option})' if option else ''
            return Triage('bad_input', _trim(line + fix))
    return None


#: Xids that report another fault, not their own: 45 (preemptive cleanup
#: after an earlier error), and 13, 31, 43 (a graphics exception, an MMU
#: fault, a stopped channel), which NVIDIA's catalog puts first on the
#: application. A log's other Xid is the cause where it has one.
_FOLLOWING_XIDS = {'13', '31', '43', '45'}
_XID = re.compile(r'NVRM: Xid \([^)]*\): (\d+)')


def _first_cause_xid(lines):
    '''The first of the hardware *lines* that is not an Xid reporting
    another fault (:data:`_FOLLOWING_XIDS`), else the first.'''
    for line in lines:
        xid = _XID.search(line)
        if not xid or xid.group(1) not in _FOLLOWING_XIDS:
            return line
    return lines[0]


def stronger_evidence(text, category):
    '''Where the root-cause line is only a consequence (a collective's
    failure, :data:`CONSEQUENCES`) or matches no table: the :class:`Triage`
    of another error line whose category comes earlier in :data:`ORDER`;
    None where there is none.'''
    if category is not None and category not in CONSEQUENCES:
        return None
    names = [name for name, _ in ORDER]
    limit = names.index(category or CONSEQUENCES[0])
    best = None
    for line in _error_lines(text):
        found = classify(line)
        if found is not None and names.index(found) < limit and (
                best is None or names.index(found) < names.index(best[0])):
            best = (found, _nccl_words(line))
    if best is None:
        return None
    found, line = best
    return Triage(found, _trim(line), *_where(line, None, text))


def non_finite(text, room=REASON_LIMIT):
    '''A ``numerics`` :class:`Triage` if the log shows a non-finite loss or
    gradient (:data:`NUMERICS`) or the loss scaler at its floor
    (:data:`MIN_LOSS_SCALE`), its reason in about *room* characters; else
    None.'''
    for line in text.splitlines():
        floor = _scale_at_floor(line) or _SCALE_AT_MINIMUM.search(line)
        match = floor or next((m for m in (p.search(line) for p in NUMERICS)
                               if m), None)
        if match:
            rank, node = _where(line, None, text)
            what = ('the loss scaler reached its floor' if floor else
                    'the loss or the gradients went non-finite')
            when = step_of(line)
            what += f' at {when}' if when else ''
            words = _excerpt(' '.join(line.split()), match.group(0),
                             room - len(what) - 2)
            return Triage('numerics', _trim(f'{what}: {words}'), rank, node)
    return None


def _scale_at_floor(line):
    '''The match where *line* is the loss scaler reducing the scale to
    :data:`MIN_LOSS_SCALE` or below (apex's "Gradient overflow. Skipping
    step, loss scaler 0 reducing loss scale to 1.0", DeepSpeed's
    "Attempted loss scale: 1, reducing to 1"); None.'''
    match = _LOSS_SCALE_DOWN.search(line)
    try:
        return match if match and float(match.group(1)) <= MIN_LOSS_SCALE \
            else None
    except ValueError:
        return None
