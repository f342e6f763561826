"""The node that computed a wrong answer, named: the runs of a check that
compares its ranks' answers (``SilentDataCorruption``:
:mod:`hpctestlib_ml.answers`) in each case's latest window, and the ranks
and nodes their ``wrong_answer`` names, beside the slow nodes
(:mod:`.nodes`).

Every such run is listed, not each case's latest alone: a node sweep
(``--distribute=all``) runs one case on every node, and the node whose
run named it is the finding. A run compared answers where it logged an
``answer_digest`` or a ``wrong_answer`` (perflogs written before these
columns have neither, and are left out).
"""
import dataclasses

from hpctestlib_ml import answers
from hpctestlib_ml.report.analysis import group
from hpctestlib_ml.report.nodes import WINDOW, in_window

#: What a perflog holds for "nothing".
_EMPTY = ('', 'None', 'null')


@dataclasses.dataclass
class Finding:
    '''A run whose check named a wrong answer.'''
    run: object             # the report's Run
    line: str               # its wrong_answer
    suspects: list          # [(rank, node)] the line names


@dataclasses.dataclass
class Compared:
    '''The runs in the window that compared answers.'''
    findings: list          # Finding, in time order per case
    runs: int               # how many runs compared answers
    nodes: list             # the nodes they ran on

    @property
    def named(self):
        '''Node -> the runs that named it.'''
        found = {}
        for finding in self.findings:
            for node in sorted({node for _, node in finding.suspects}):
                found[node] = found.get(node, 0) + 1
        return found


def _logged(run, name):
    value = (run.params.get(name) or '').strip()
    return '' if value in _EMPTY else value


def wrong_answers(runs, window=WINDOW):
    '''The :class:`Compared` of *runs* over each case's latest *window*
    seconds (:func:`.nodes.in_window`, per ``system:partition`` and
    case).'''
    findings, count, nodes = [], 0, set()
    for _, case_runs in sorted(group(runs, lambda r: r.case_here).items()):
        for run in in_window(case_runs, window):
            line = _logged(run, 'wrong_answer')
            if not line and not _logged(run, 'answer_digest'):
                continue
            count += 1
            nodes.update(n for n in _logged(run, 'job_nodelist').split(',')
                         if n)
            if line:
                findings.append(Finding(run, line, answers.named(line)))
    return Compared(findings, count, sorted(nodes))
