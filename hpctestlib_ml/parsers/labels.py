"""Launchers' labels on log lines: the one place every parser learns them.

A job started by a multi-process or multi-host launcher has each line of a
process's output behind the label the launcher (or the log collector) put
there::

    [worker :11]   train_samples_per_second =       12.661
    [1,0]<stdout>:Total img/sec on 4 GPU(s): 432.8 +-4.9
    [0]<stdout>:Iter #0: 108.3 img/sec per GPU
    [9] :::MLLOG {"namespace": "", "time_ms": 1683368584892, ...
     3: total images/sec: 308.45
    [rank0]: RuntimeError: CUDA error: out of memory
    [default3]: iteration       20/ 3125000 | ...
    INFO 2024-10-28T00:56:14.082Z [resource.labels.containerName: x] epoch = 1

respectively: ``gcloud compute tpus tpu-vm ssh --worker=all`` (the TPU
recipes' ``benchmark.sh``), Open MPI's ``mpirun --tag-output``,
``horovodrun``, Intel MPI's ``mpirun -l``, Slurm's ``srun --label``
(right-aligned task numbers), PyTorch's ranked error lines (2.2 and
later), ``torchrun --tee`` and Google Cloud Logging's export of a GKE job. A label may sit behind another
(``srun --label`` around ``torchrun``: ``0: [default1]: ...``).

:func:`strip` takes them off before a parser reads the text, so that a
parser's own patterns may be anchored (a Trainer metric table, Megatron's
argument dump, the suite's ``[hpcml]`` lines) and each process's lines stay
together (:func:`strip` keeps each labelled stream's lines in order, the
streams in the order they first appear), as if each process had written its
own file. :func:`split` and :func:`rank_of` say which process a line is
from.
Standard library only.
"""
import re

#: The labels, one alternative per launcher (module docstring). srun's is
#: digits, a colon and a space (or the line's end): "12:34:56" is no label.
_FORMS = (
    r'\[worker ?:\s*\d+\]',
    r'\[\d+(?:,\d+)?\]<std(?:out|err)>:',
    r'\[\d+\](?= )',
    r'\[(?:rank|default)\d+\]:',
    r'\d+:(?= |$)',
    r'(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL) '
    r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z'
    r'(?: \[resource\.labels\.\w+: [^\]\n]*\])?',
)

_ALTERNATIVES = '|'.join(_FORMS)

#: One label at the start of a line (leading blanks allowed: srun
#: right-aligns its task numbers), with the one blank that follows it.
LABEL = re.compile(r'[^\S\n]*(' + _ALTERNATIVES + r')[^\S\n]?')

#: One or more labels, as a pattern for other parsers' patterns (no
#: groups of its own): ``'^(?:(?P<labels>' + PREFIX + '))?RuntimeError'``.
PREFIX = r'(?:[^\S\n]*(?:' + _ALTERNATIVES + r')[^\S\n]?)+'

#: Any line of a text that starts with a label.
_ANY = re.compile(r'^' + LABEL.pattern, re.MULTILINE)

#: Labels that name a rank, and where the number is: Open MPI's
#: "[job,rank]", horovodrun's and Intel MPI's "[rank]", torch's
#: "[rankN]"/"[defaultN]" (torchrun's local rank), srun's task. A TPU
#: worker or a Cloud Logging stamp names a host or nothing, not a rank.
_RANK = re.compile(r'^\[(?:\d+,)?(\d+)\](?:<std|$)|'
                   r'^\[(?:rank|default)(\d+)\]:|^\s*(\d+):')

#: Cloud Logging's per-line timestamp, not part of a stream's name.
_STAMP = re.compile(r'\d{4}-\d\d-\d\dT[\d:.]+Z')


def split(line):
    '''(labels, rest) of one *line*: its labels, outermost first (a tuple,
    empty where it has none), and the text behind them.'''
    found = []
    while len(found) < 4:
        match = LABEL.match(line)
        if not match:
            break
        found.append(match.group(1))
        line = line[match.end():]
    return tuple(found), line


def rank(label):
    '''The rank (a string of digits) that *label* names, None where it
    names none (a TPU worker, a Cloud Logging stamp) or is None.'''
    match = _RANK.match(label or '')
    return next(g for g in match.groups() if g) if match else None


def rank_of(found):
    '''The rank a line's labels *found* (:func:`split`'s, or the text
    :data:`PREFIX` matched) name: the innermost that names one (srun's
    task around torchrun's ``[rankN]:`` is the node's agent, not the
    rank); None where none does.'''
    if isinstance(found, str):
        found = split(found)[0]
    ranks = [rank(label) for label in found]
    return next((r for r in reversed(ranks) if r is not None), None)


def _stream(found):
    '''The stream a line's labels name: the labels without Cloud Logging's
    per-line timestamp or blanks ("[worker :0]" and "[worker:0]" are one
    worker).'''
    return tuple(_STAMP.sub('', label).replace(' ', '') for label in found)


def strip(text):
    '''*text* without its lines' labels, each labelled stream's lines
    together, in order, the streams in the order they first appear (lines
    without a label are a stream of their own); *text* itself where no
    line carries a label.'''
    if not _ANY.search(text):
        return text
    streams = {}
    for line in text.split('\n'):
        found, rest = split(line)
        streams.setdefault(_stream(found), []).append(rest)
    return '\n'.join(line for lines in streams.values() for line in lines)
