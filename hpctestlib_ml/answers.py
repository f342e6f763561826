"""Answers compared across ranks: the rank whose device computed a wrong
answer, named (silent data corruption), from the records of ``python -m
sdc`` (the ``SilentDataCorruption`` check; what it computes:
``src/sdc/__init__.py``).

Every rank prints, per repetition, the digest of each result (an *item*:
``matmul bf16 #2``, ``step fp32 grads``; its ``[hpcml] answer`` record),
and where ranks' digests differ the ranks measure by how much (its
``[hpcml] answer_error`` records). A rank's *answer* in a repetition is
the digest of its items' digests (:func:`combined`, prefixed with the
program's version: ``v1:...``). The right answer is, in this order:

1. the *known-good* digest of the case's software stack, where the
   partition's history holds one (:func:`stack_id`: framework and library
   versions, runtime, driver, switches, devices; written by ``hpcml
   references --write`` from passing runs, :func:`known_good`) and some
   rank computed it;
2. else the answer more than half of the ranks computed in every
   repetition (a majority needs three ranks or more);
3. else none: the ranks that disagree are all suspects, and the line says
   so, with what would tell them apart.

A rank whose answer differs in any repetition from the right one is named
in one line (:func:`verdict`): its node, device, the items that differ and
by how much (the elements not bit-identical and their largest relative
error against a right rank's result), bit-identical elsewhere. Beside it:
a computation that is not deterministic (every rank's repetitions differ:
the software's fault, not a node's), ranks that cannot be compared (other
devices or thread counts), and every rank agreeing on an answer that is
not the known-good one (a change the provenance does not show, or every
node wrong).

Pure: the standard library and the records parser only. The check
(:mod:`hpctestlib_ml.plugins.answers`), ``hpcml triage`` (from the log
alone, without history) and ``hpcml report`` (the perflog's
``wrong_answer``) read it.
"""
import collections
import dataclasses
import hashlib
import re

from hpctestlib_ml import perflog_fields
from hpctestlib_ml.parsers import hpcml_records

#: The perflog fields that make a software stack: a result computed under
#: another of any of them may differ in its last bits, and its history's
#: digest is then another known-good one, not an alarm.
STACK_FIELDS = perflog_fields.stack_fields()

#: The words a wrong answer's line starts with (the ``hardware`` category
#: of :mod:`hpctestlib_ml.triage` knows them).
WRONG = 'silent data corruption'

#: The words of every rank agreeing on an answer that is not the known-good
#: one (the ``numerics`` category of :mod:`hpctestlib_ml.triage` knows
#: them).
KNOWN_DIFFERS = 'not the known-good digest of this stack'

#: What a perflog holds for "nothing" (:mod:`hpctestlib_ml.report.history`).
_EMPTY = ('', 'None', 'null', 'nan')

#: Hex digits of a combined digest (``src/sdc``'s per item: 16).
DIGEST_CHARS = 16


def combined(digests, version):
    '''A rank's answer: ``v<version>:`` and the first 16 hex digits of the
    SHA-256 of its items' digests (*digests*: item -> digest), in item
    order.'''
    text = '\n'.join(f'{item}={digests[item]}' for item in sorted(digests))
    return (f'v{version}:' +
            hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS])


def stack(fields):
    '''The software stack of a result, as text: its :data:`STACK_FIELDS`
    from *fields* (a perflog line's, or the check's own), ``-`` where
    empty.'''
    values = []
    for name in STACK_FIELDS:
        value = str(fields.get(name) or '').strip()
        values.append('-' if value in _EMPTY else value)
    return ' | '.join(values)


def stack_id(fields):
    '''A short key of :func:`stack` (12 hex digits): the references
    file's key of a known-good digest.'''
    return hashlib.sha256(stack(fields).encode()).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class KnownGood:
    '''The digest passing runs of one stack agreed on (the references
    file's ``answers``).'''
    digest: str
    runs: int
    stack: str = ''


def known_good(entry):
    '''The :class:`KnownGood` of a references file's entry (``{digest,
    runs, stack}``), None for none or one of another shape.'''
    if not isinstance(entry, dict) or not entry.get('digest'):
        return None
    return KnownGood(str(entry['digest']), int(entry.get('runs') or 0),
                     str(entry.get('stack') or ''))


@dataclasses.dataclass
class Verdict:
    '''What the ranks' answers say.'''
    #: The right answer (``v1:...``), '' where none is known.
    digest: str = ''
    #: One line each, their category's words first (:data:`WRONG`).
    problems: list = dataclasses.field(default_factory=list)
    #: The line naming the wrong ranks (the perflog's ``wrong_answer``),
    #: '' where none.
    wrong: str = ''
    #: (rank, node) of each rank named, first the likeliest.
    suspects: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Rank:
    rank: int
    node: str
    device: str
    kind: tuple
    reps: dict          # repetition -> {item: digest}
    answers: dict       # repetition -> combined digest

    @property
    def where(self):
        return f'rank {self.rank} on {self.node}'


def _device(record, answer):
    '''``cuda:0 NVIDIA H100 80GB HBM3``, ``cpu x86_64 AVX512, 1 thread``.'''
    record = record or {}
    name = record.get('name') or 'unknown device'
    if record.get('kind') == 'gpu':
        return f'{record.get("backend", "cuda")}:{record.get("index")} {name}'
    threads = answer.get('threads')
    isa = f' {answer["isa"]}' if answer.get('isa') else ''
    return (f'cpu {name}{isa}, {threads} thread' +
            ('' if threads == 1 else 's'))


def _ranks(answers, devices):
    '''{rank: _Rank} of the ``answer`` records *answers* and the
    ``device`` records *devices* ({rank: record}), in rank order whatever
    the order the ranks' lines reached the log in.'''
    found = {}
    for record in answers:
        rank = record.get('rank')
        if not isinstance(rank, int) or not isinstance(
                record.get('digests'), dict):
            continue
        device = devices.get(rank) or {}
        if rank not in found:
            gpu = device.get('kind') == 'gpu'
            found[rank] = _Rank(
                rank, str(record.get('node') or '?'),
                _device(device, record),
                (record.get('version'), device.get('name'),
                 None if gpu else record.get('isa'),
                 None if gpu else record.get('threads')), {}, {})
        entry = found[rank]
        repetition = record.get('repetition', 1)
        entry.reps[repetition] = dict(record['digests'])
        entry.answers[repetition] = combined(record['digests'],
                                             record.get('version'))
    return {rank: found[rank] for rank in sorted(found)}


def _fmt(value):
    return 'inf' if value == float('inf') else f'{value:.2g}'


def _item_error(errors, rank, repetition, item, right):
    '''How much *rank*'s *item* differed in *repetition*, measured against
    one of the ranks *right*: ``1 of 65536 elements, max relative error
    1.2e-04``, or None where no such measure was printed.'''
    for e in errors:
        if (e.get('rank'), e.get('repetition', 1), e.get('item')) == \
                (rank, repetition, item) and e.get('against') in right:
            worst = e.get('max_rel_error')
            worst = float('inf') if worst is None else float(worst)
            return (f'{e.get("differ")} of {e.get("elements")} elements, '
                    f'max relative error {_fmt(worst)}')
    return None


def _differences(entry, right_ranks, errors, right_items):
    '''What *entry*'s answers differ in from the right ones (*right_items*:
    repetition -> {item: digest}; a repetition it lacks is held against
    another's, since every repetition computes the same): ``matmul fp32
    #2 (1 of 65536 elements, max relative error 1.2e-04)``, the
    repetitions named where it differed in some only; and whether it
    was bit-identical in the other items.'''
    items, reps = {}, []
    for repetition, digests in sorted(entry.reps.items()):
        right = right_items.get(repetition) or next(
            iter(right_items.values()), None)
        if right is None or digests == right:
            continue
        reps.append(repetition)
        for item in sorted(set(right) | set(digests)):
            if digests.get(item) != right.get(item):
                items.setdefault(item, _item_error(
                    errors, entry.rank, repetition, item, right_ranks))
    parts = [f'{item} ({how})' if how else item
             for item, how in items.items()]
    text = ', '.join(parts) if parts else 'its answer'
    if reps and len(reps) < len(entry.reps):
        text += (f' in repetition {", ".join(map(str, reps))} of '
                 f'{len(entry.reps)}')
    every = set().union(*(set(d) for d in entry.reps.values()))
    return text, bool(every - set(items))


def verdict(answers, errors=(), devices=None, known=None):
    '''The :class:`Verdict` of the ``answer`` records *answers*, the
    ``answer_error`` records *errors* and the ``device`` records
    *devices* ({rank: record}), against the :class:`KnownGood` *known*
    of the run's stack (None: none). See the module docstring.'''
    ranks = _ranks(answers, devices or {})
    if not ranks:
        return Verdict(problems=['no rank printed an [hpcml] answer '
                                 'record'])
    kinds = {e.kind for e in ranks.values()}
    if len(kinds) > 1:
        who = '; '.join(f'{e.where}: {e.device}' for e in ranks.values())
        return Verdict(problems=[
            f'answers not comparable: the ranks computed on other devices '
            f'or thread counts ({who}): run the check on nodes of one kind, '
            f'with -S threads_per_rank= where their CPUs differ'])
    version = next(iter(kinds))[0]
    if known and not known.digest.startswith(f'v{version}:'):
        known = None                # another version of the computation
    nondeterministic = _nondeterministic(ranks)
    if nondeterministic:
        return Verdict(problems=[nondeterministic])
    right = _right_answer(ranks, known)
    if right is None:
        return _no_right_answer(ranks, errors, known)
    answer, source = right
    right_ranks = [e.rank for e in ranks.values()
                   if set(e.answers.values()) == {answer}]
    right_items = {rep: digests for e in ranks.values()
                   for rep, digests in e.reps.items()
                   if e.answers[rep] == answer}
    wrong = [e for e in ranks.values() if set(e.answers.values()) !=
             {answer}]
    found = Verdict(digest=answer)
    if wrong:
        lines = []
        for entry in wrong:
            what, elsewhere = _differences(entry, right_ranks, errors,
                                           right_items)
            lines.append(f'{entry.where} ({entry.device}): {what} differs '
                         f'from {source}' +
                         ('; bit-identical elsewhere' if elsewhere else ''))
        found.wrong = f'{WRONG}: ' + '; '.join(lines)
        found.problems.append(found.wrong)
        found.suspects = [(e.rank, e.node) for e in wrong]
    if known and answer != known.digest and len(ranks) == 1:
        entry = next(iter(ranks.values()))
        found.wrong = (f'{WRONG}: {entry.where} ({entry.device}): its answer '
                       f'{answer} differs from the known-good digest of '
                       f'this stack {known.digest} ({known.runs} passing '
                       f'runs), and no other rank computed beside it: its '
                       f'device computed wrongly, or something changed that '
                       f'the provenance does not show')
        return Verdict(problems=[found.wrong], wrong=found.wrong,
                       suspects=[(entry.rank, entry.node)])
    if known and answer != known.digest:
        found.problems.append(
            f'every rank that agrees computed {answer}, {KNOWN_DIFFERS} '
            f'{known.digest} ({known.runs} passing runs): a change the '
            f'provenance does not show, or every node computes wrongly; '
            f'where the stack changed on purpose, derive the references '
            f'again (hpcml references --write)')
    return found


def _nondeterministic(ranks):
    '''The problem of a computation that is not deterministic here: two
    ranks or more, each of whose repetitions differ among themselves;
    None otherwise.'''
    if len(ranks) < 2 or not all(len(set(e.answers.values())) > 1
                                 for e in ranks.values()):
        return None
    first = next(iter(ranks.values()))
    reps = sorted(first.reps)
    items = sorted(item for item in first.reps[reps[0]]
                   if len({d.get(item) for d in first.reps.values()}) > 1)
    return (f'the computation is not deterministic here: every rank\'s '
            f'repetitions differ ({", ".join(items[:4])}): an operation '
            f'that ignores torch.use_deterministic_algorithms, or another '
            f'thread count between repetitions; no node is to blame')


def _right_answer(ranks, known):
    '''(answer, what it is) of the right answer: the known-good digest
    where a rank computed it in some repetition, else the answer more than
    half of the ranks computed in every one; None where neither.'''
    computed = {a for e in ranks.values() for a in e.answers.values()}
    if known and known.digest in computed:
        return known.digest, (f'the known-good digest of this stack '
                              f'({known.runs} passing runs)')
    steady = collections.Counter(
        next(iter(set(e.answers.values())))
        for e in ranks.values() if len(set(e.answers.values())) == 1)
    if steady:
        answer, count = steady.most_common(1)[0]
        if 2 * count > len(ranks):
            return answer, (f"the majority's ({count} of {len(ranks)} "
                            f'ranks)')
    return None


def _no_right_answer(ranks, errors, known):
    '''The verdict where no answer can be told right: every rank is a
    suspect, with what the first that differs from the lowest rank differs
    in (one rank: what its repetitions differ in).'''
    first = ranks[min(ranks)]
    if len(ranks) == 1:
        what, _ = _differences(first, [], errors, {
            rep: first.reps[min(first.reps)] for rep in first.reps})
        text = (f'{first.where} ({first.device}): its repetitions differ '
                f'({what}), and one rank has no other to be compared with')
    else:
        other = next(e for e in ranks.values() if e.reps != first.reps)
        what, elsewhere = _differences(other, list(ranks), errors,
                                       first.reps)
        text = (' and '.join(e.where for e in ranks.values()) +
                f' disagree ({what}' +
                ('; bit-identical elsewhere' if elsewhere else '') +
                ') with no majority and ' +
                ('none computed the known-good digest of this stack'
                 if known else 'no known-good digest of this stack') +
                (': both are suspects' if len(ranks) == 2 else
                 ': all are suspects'))
    text += ('; run it on 3 ranks or more' +
             ('' if known else ', or derive known-good digests from passing '
                               'runs (hpcml references --write)'))
    line = f'{WRONG}: {text}'
    return Verdict(problems=[line], wrong=line,
                   suspects=[(e.rank, e.node) for e in ranks.values()])


#: A rank named in a line: ``rank 1 on n2``.
_NAMED = re.compile(r'\brank (\d+) on ([\w.-]+)')


def named(line):
    '''[(rank, node)] of every rank a :attr:`Verdict.wrong` line names.'''
    return [(int(rank), node) for rank, node in _NAMED.findall(line or '')]


def log_verdict(text):
    '''The :class:`Verdict` of a job's log *text* alone (no history): what
    ``hpcml triage`` says of it; None where it holds no answer records.'''
    answers = hpcml_records.records(text, 'answer')
    if not answers:
        return None
    return verdict(answers, hpcml_records.records(text, 'answer_error'),
                   hpcml_records.by_rank(text, 'device'))
