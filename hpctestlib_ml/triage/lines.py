"""One line of a log, as triage reads it: its category
(:func:`classify`), the rank and node it names (:func:`_where`), its step
(:func:`step_of`), and the reason it makes (:class:`Triage`, cut at
:data:`REASON_LIMIT`)."""
import dataclasses
import re

from hpctestlib_ml.parsers import failures, labels
from hpctestlib_ml.triage.patterns import DEFAULT_CATEGORY, ORDER

#: The longest reason, in characters (failures' limit).
REASON_LIMIT = 300


@dataclasses.dataclass(frozen=True)
class Triage:
    '''A run's failure: its *category* (one of :data:`CATEGORIES`, None for
    a log that shows none), the one-line *reason*, and the *rank* and
    *node* where the log names them.'''
    category: str
    reason: str
    rank: str = None
    node: str = None


#: Lines that report an error, where a cause may be stated: words of
#: error, NCCL's WARN, a C++ exception's what(), the OOM killer. Not
#: NCCL's INFO lines (they print "No such file or directory" for plugins
#: they do not need) nor Python's warnings.
_ERROR_LINE = re.compile(
    r'[Ee]rror|ERROR|\bWARN\b|[Ee]xception|what\(\)|[Ff]ail|Killed|'
    r'Out Of Memory|out of memory|\bnan\b|\binf\b|Unable to|CANCELLED|'
    r'Watchdog|[Tt]imed? ?out')
_INFO_LINE = re.compile(r'NCCL INFO|Warning:')

#: Where a line names its rank: torchrun's "[rank3]:", PyTorch's "[Rank
#: 1]", Megatron's "Rank 3:", the failures parser's "rank 1 on n2".
_RANK = re.compile(r'\[[Rr]ank ?(\d+)\]|\b[Rr]ank (\d+)\b')
#: Where a line names its node: Megatron's "node: set-zw04-...", the
#: failures parser's "rank 1 on n2", NCCL's host (:func:`_nccl_words`),
#: Open MPI's "on node n3", a cluster's health alert "Xid errors on
#: instance: ip-26-0-146-100" (huggingface/m4-logs).
_NODE = re.compile(r'\bnode: ?([\w.-]+)|\brank \S+ on ([\w.-]+)|'
                   r'\bNCCL on ([\w.-]+)|\bon node ([\w.-]+)|'
                   r'\bon instance: ([\w.-]+)')
#: NCCL's line prefix "ng30903:3063028:3066152 [3] include/alloc.h:178
#: NCCL WARN ...": host, GPU (the process's CUDA device), message.
_NCCL_LINE = re.compile(r'^([\w.-]+):\d+:\d+ \[(\d+)\] (?:\S+ )?NCCL WARN '
                        r'(.+)$')


def classify(line):
    '''The category of the first table in :data:`ORDER` that matches
    *line*, or None.'''
    for category, table in ORDER:
        if any(pattern.search(line) for pattern in table):
            return category
    return None


def error_line(text):
    '''The line that says what went wrong in a log the failures parser
    finds no failure in (no traceback, launcher line or exit code: a log
    cut from an issue, NCCL's or argparse's own lines): its last
    exception, else the first error line a table classifies; None.'''
    line = failures.exception_line(text)
    if line:
        return line
    for line in _error_lines(text):
        if classify(line):
            return _nccl_words(line)
    return None


def _error_lines(text):
    '''The lines of *text* that report an error (:data:`_ERROR_LINE`),
    stripped.'''
    return [ln.strip() for ln in text.splitlines()
            if _ERROR_LINE.search(ln) and not _INFO_LINE.search(ln)]


#: Where a training line names its step, as the loops write it: an MLLOG
#: record's metadata ("step": 2), TensorFlow's "global step 2458",
#: Megatron's "iteration 5426/ 250000", "step 1655", "Iter 12", a progress
#: bar's "| 320/320 [" (tqdm, Lightning); else HF Trainer's "'epoch': 0.29".
_STEPS = (
    ('step', re.compile(r'"step(?:_num)?": (\d+)|\bglobal[ _]step[ :=]*(\d+)|'
                        r'\biteration +(\d+)|\b[Ss]tep[ :=#]*(\d+)|'
                        r'\b[Ii]ter(?:ation)?[ :=#]*(\d+)|\| *(\d+)/\d+ \[')),
    ('epoch', re.compile(r"'epoch': '?([\d.]+)")),
)


def step_of(line):
    '''``step N`` (or ``epoch E``) where *line* names its training step;
    None.'''
    for unit, pattern in _STEPS:
        match = pattern.search(line)
        if match:
            return f'{unit} {next(g for g in match.groups() if g)}'
    return None


#: How much of a long line a reason quotes before what matched in it.
_EXCERPT_BEFORE = 80


def _excerpt(line, matched, room):
    '''*line*, or where what matched in it ends past *room* characters (in
    an MLLOG record, say) its part that ends with *matched*: the reason
    then shows the NaN, not only the record's head.'''
    end = line.find(matched) + len(matched)
    if end <= room or matched not in line:
        return line
    start = max(0, end - len(matched) - _EXCERPT_BEFORE)
    return '...' + line[start:end] + ('...' if end < len(line) else '')


def _nccl_words(line):
    '''NCCL's WARN line as "NCCL on HOST (GPU N): message"; other lines
    as they are.'''
    match = _NCCL_LINE.match(line.strip())
    if not match:
        return line.strip()
    host, gpu, message = match.groups()
    return f'NCCL on {host} (GPU {gpu}): {message.strip()}'


def _where(line, cause, text):
    '''(rank, node) of a failure: the failed rank's where the failures
    parser found one, else what *line* names, else the rank of
    torchrun's label on it in *text*; None where unknown.'''
    if cause is not None:
        return cause.rank, cause.node
    rank = _RANK.search(line)
    node = _NODE.search(line)
    return (next(g for g in rank.groups() if g) if rank else
            _label(line, text),
            next(g for g in node.groups() if g) if node else None)


def _label(line, text):
    '''The rank a launcher's label gives the line of *text* that holds
    *line* ("[rank3]: torch.OutOfMemoryError: ...", :mod:`~hpctestlib_ml.
    parsers.labels`), or None.'''
    for whole in text.splitlines():
        found, rest = labels.split(whole)
        if found and line[:100] in rest:
            rank = labels.rank_of(found)
            if rank is not None:
                return rank
    return None


def _trim(line):
    '''*line* stripped, cut at :data:`REASON_LIMIT` characters.'''
    line = line.strip()
    return line if len(line) <= REASON_LIMIT else line[:REASON_LIMIT] + '...'


def problems_category(problems):
    '''The category of a run that ended well but whose log shows
    *problems* (the workloads' one-line log problems): the first of
    :data:`ORDER` a problem matches, else :data:`DEFAULT_CATEGORY`.'''
    found = [classify(problem) for problem in problems]
    for category, _ in ORDER:
        if category in found:
            return category
    return DEFAULT_CATEGORY
