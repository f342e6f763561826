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
    gpu-node-01:   num_layers ...................................... 24

respectively: ``gcloud compute tpus tpu-vm ssh --worker=all`` (the TPU
recipes' ``benchmark.sh``), Open MPI's ``mpirun --tag-output``,
``horovodrun``, Intel MPI's ``mpirun -l``, Slurm's ``srun --label``
(right-aligned task numbers), PyTorch's ranked error lines (2.2 and
later), ``torchrun --tee``, Google Cloud Logging's export of a GKE job and
pdsh, which puts ``host: `` before every line a remote command prints
(pdsh(1): ``-N`` "disable hostname: prefix on lines of output"; DeepSpeed's
default multi-node launcher, ``PDSHRunner``, runs ``pdsh -S -f 1024 -w
HOSTS``, so a Megatron-DeepSpeed job's whole output is labelled so). A
label may sit behind another (``srun --label`` around ``torchrun``: ``0:
[default1]: ...``).

A host name is not told from a line's own first word by its form alone
(``RuntimeError: boom``, ``Epoch: 3``), so pdsh's label is known by use:
a ``host: `` that starts a good share of the lines (:func:`pdsh_hosts`),
and only in texts where one does (:func:`strip`, :func:`split` given the
hosts).

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


#: A line's first word as pdsh's ``host: `` would be: a host name (letters,
#: digits, dots, hyphens, underscores) or an IPv4 address, at the line's
#: start, a colon and one blank.
_HOST = re.compile(r'^([A-Za-z0-9][\w.-]*[A-Za-z0-9]): ', re.MULTILINE)
#: A first word that is a host name: one with a digit, a dot or a hyphen
#: (``node01``, ``gpu-node-3``, ``10.0.0.7``, ``nid001234``), or
#: ``localhost``. Not one a program starts a line with: a log level, a
#: word ("Note: ", "Epoch: "), an exception's or warning's name, srun's
#: task number (its own label, :data:`_FORMS`).
_HOSTLIKE = re.compile(r'(?=.*[\d.-])|localhost$')
_NOT_HOST = re.compile(r'\d+$|(?i:.*(?:error|exception|warning|interrupt|'
                       r'exit|iter|iteration|step|epoch|loss|rank|batch)'
                       r'[\d_-]*)$')
#: How many lines, and what share of the lines, a host must start for
#: its word to be pdsh's label and not a line's own.
_PDSH_LINES = 3
_PDSH_SHARE = 0.2


def pdsh_hosts(text):
    '''The hosts whose pdsh label ``host: `` starts lines of *text*: where
    words that look like host names (:data:`_HOSTLIKE`) start a fifth of
    its non-blank lines at least, one of them :data:`_PDSH_LINES` lines at
    least, every such word; () where none does.'''
    if ': ' not in text:
        return ()
    counts = {}
    for host in _HOST.findall(text):
        if _HOSTLIKE.match(host) and not _NOT_HOST.match(host):
            counts[host] = counts.get(host, 0) + 1
    if not counts or max(counts.values()) < _PDSH_LINES:
        return ()
    lines = sum(1 for line in text.split('\n') if line.strip())
    if sum(counts.values()) < _PDSH_SHARE * lines:
        return ()
    return tuple(counts)


def split(line, hosts=()):
    '''(labels, rest) of one *line*: its labels, outermost first (a tuple,
    empty where it has none), and the text behind them; a pdsh label
    counts where its host is one of *hosts* (:func:`pdsh_hosts` of the
    text the line is from).'''
    found = []
    while len(found) < 4:
        match = LABEL.match(line)
        if match:
            found.append(match.group(1))
            line = line[match.end():]
            continue
        host = _HOST.match(line) if hosts else None
        if not host or host.group(1) not in hosts:
            break
        found.append(host.group(0)[:-1])
        line = line[host.end():]
    return tuple(found), line


def strip_hosts(text, hosts=None):
    '''*text* without pdsh's ``host: `` labels (those of *hosts*, else
    of :func:`pdsh_hosts`), each line where it was: for readers that take
    the other labels themselves (:data:`PREFIX`) and read the lines in
    their order (the failures parser, triage); *text* itself where it has
    none.'''
    hosts = pdsh_hosts(text) if hosts is None else hosts
    if not hosts:
        return text
    pattern = re.compile(r'^(?:' + '|'.join(map(re.escape, hosts)) + r'): ',
                         re.MULTILINE)
    return pattern.sub('', text)


def host_of(line, text, hosts):
    '''The host whose pdsh label is before the line of *text* that holds
    *line* (its first 100 characters), None where none is.'''
    if not hosts:
        return None
    for whole in text.splitlines():
        host = _HOST.match(whole)
        if host and host.group(1) in hosts and line[:100] in whole:
            return host.group(1)
    return None


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
    '''*text* without its lines' labels (pdsh's where it has them:
    :func:`pdsh_hosts`), each labelled stream's lines together, in order,
    the streams in the order they first appear (lines without a label are
    a stream of their own); *text* itself where no line carries a
    label.'''
    hosts = pdsh_hosts(text)
    if not hosts and not _ANY.search(text):
        return text
    streams = {}
    for line in text.split('\n'):
        found, rest = split(line, hosts)
        streams.setdefault(_stream(found), []).append(rest)
    return '\n'.join(line for lines in streams.values() for line in lines)
