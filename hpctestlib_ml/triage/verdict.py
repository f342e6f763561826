"""The verdict on a run's log (:func:`triage`): evidence by nature first,
then the root-cause line, classified, with what the log adds."""
import dataclasses
import re

from hpctestlib_ml.parsers import failures, labels
from hpctestlib_ml.triage.patterns import DEFAULT_CATEGORY
from hpctestlib_ml.triage.lines import (REASON_LIMIT, Triage, _trim, _where,
                                        classify, error_line)
from hpctestlib_ml.triage.causes import (by_nature, non_finite,
                                         stronger_evidence, wrong_answer)
from hpctestlib_ml.triage.detail import with_detail
from hpctestlib_ml.triage.recognise import no_failure


def triage(text, state=None, exitcode=None):
    '''The :class:`Triage` of a run's log *text*, with the job *state*
    ReFrame polled and the job's *exitcode* where they are known, its
    reason with what the log says beside it (:func:`with_detail`). A log
    whose lines carry pdsh's ``host: `` (DeepSpeed's multi-node launcher)
    is read without it, its node the host whose line says why.'''
    hosts = labels.pdsh_hosts(text)
    bare = labels.strip_hosts(text, hosts)
    found = with_detail(_triage(bare, state, exitcode), bare)
    if hosts and found.node is None and found.category is not None:
        node = labels.host_of(found.reason, text, hosts)
        if node:
            found = dataclasses.replace(found, node=node)
    return found


def _triage(text, state, exitcode):
    '''The :class:`Triage` of *text* (:func:`triage`).'''
    found = by_nature(text, state)
    if found:
        return found
    failed = failures.failure_reason(text, state, exitcode)
    line = root_line(text, state)
    if line is None or failed is None and non_finite(text):
        # No line says why (the run ended well, or only its exit code or
        # last line says it did not), or it ended well with a non-finite
        # loss: that loss is its failure.
        return (non_finite(text) or
                (Triage(DEFAULT_CATEGORY, failed) if failed else
                 wrong_answer(text) or no_failure(text)))
    category = classify(line)
    better = stronger_evidence(text, category)
    if better:
        return better
    numerics = (non_finite(text, REASON_LIMIT - len(line) - 7)
                if category is None else None)
    if numerics:
        category, line = 'numerics', f'{line} after {numerics.reason}'
    category = category or DEFAULT_CATEGORY
    if category == 'out_of_memory' and _SIGKILL.search(line):
        line += _SIGKILL_NOTE
    rank, node = _where(line, failures.root_cause(text), text)
    lagging = _DESYNC.search(text) if category == 'communication' else None
    if lagging:
        rank = lagging.group(1)
        line = (f'rank {rank} {lagging.group(2).strip()} (PyTorch\'s desync '
                f'report); {line}')
    return Triage(category, _trim(line), rank, node)


#: PyTorch's desync report at a watchdog timeout (TORCH_NCCL_DESYNC_DEBUG=1)
#: names the rank the others waited for: " - To our best knowledge, the
#: lagging/dead/mismatched ranks that caused the desync are:" then "[1]
#: finished collective #2, but didn't join collective #3 (count from 1)"
#: (stas00/ml-engineering, debug/pytorch.md).
_DESYNC = re.compile(r'ranks that caused the desync are:\s*\n\s*\[(\d+)\]'
                     r'([^\n]*)')


def root_line(text, state):
    '''The line that says why the run failed: the failures parser's where
    it found a failed rank or an exception or a program's own error, else
    the first error line a table classifies (:func:`error_line`); None
    where the log says no such thing.'''
    if (failures.root_cause(text) or failures.exception_line(text) or
            failures.program_error(text)):
        return failures.failure_line(text, state)
    return error_line(text)


#: A rank killed by SIGKILL as the failures parser words it, and what the
#: reason adds: the category is inferred, not read in the log.
_SIGKILL = re.compile(r'died: Killed \(srun\)|killed by signal 9\b')
_SIGKILL_NOTE = ('; SIGKILL and no other cause in the log: most often the '
                 'out-of-memory killer')
