"""Which kind of failure a training run had, and why, in one line.

A failed case's message starts with its category, so that whoever reads it
knows at once who acts on it (docs/guide/regression.md, "Triage: failures
and who acts on them"):

``out_of_memory``  device or host memory ran out (the user's sizes)
``communication``  NCCL, RCCL, Gloo, MPI, collective timeouts, watchdogs
``hardware``       Xid, ECC, a GPU fallen off the bus (the site)
``filesystem``     no space, I/O errors, stale handles, quota, missing data
``scheduler``      time limit, cancelled, node failure, preemption
``numerics``       a non-finite loss or gradient, loss scale underflow
``software``       import errors, version mismatches, exceptions in code
``bad_input``      invalid arguments
``hang``           no rank advanced: the suite's hang watch ended the job
                   (the user for a dead data loader, the operators for a
                   stuck collective or node)

The root cause wins over its consequences (one rank's out-of-memory error
makes its peers fail in the collective; the answer is that error on that
rank):

1. evidence that is a cause by nature, wherever it stands in the log: the
   GPU's own errors (:data:`HARDWARE`), the suite's hang watch, which
   ended the job and said which rank stopped where (:func:`hang`; the
   deaths of the ranks it ended are its consequences), Slurm's refusal
   of the job
   (:func:`submission_refused`) and the scheduler's end of the job
   (:func:`hpctestlib_ml.parsers.failures.job_end`: its time limit, an
   oom-kill event or its memory limit, preemption, a failed node,
   scancel);
2. the root-cause line :mod:`hpctestlib_ml.parsers.failures` finds (the
   rank that failed first, with its own exception or signal), classified
   by the pattern tables (:mod:`.patterns`) in :data:`ORDER`; where it is
   only a collective's failure or a plain exception, another error line of
   the log that says more (an out-of-memory error, a full disk, a NaN) is
   the cause it reported;
3. a log that ended well but whose loss went non-finite: ``numerics``, at
   its step.

The reason then says what the log adds beside its line
(:func:`with_detail`): the collective a watchdog timed out, the GPU
architecture a PyTorch build lacks. A log that shows no failure says
whether it holds a training log at all (:func:`no_failure`).

A log that ended well and holds the answers of the check of silent data
corruption (``[hpcml] answer`` records) is judged by
:mod:`hpctestlib_ml.answers` from the log alone, without the known-good
digests of the site's history: a rank whose answer differs from the
majority's is ``hardware`` (:func:`wrong_answer`).

The package: the pattern tables (:mod:`.patterns`), one line read
(:mod:`.lines`: its category, rank, node and reason), the evidence weighed
(:mod:`.causes`), what a reason adds (:mod:`.detail`), a log that shows no
failure (:mod:`.recognise`) and the verdict (:mod:`.verdict`); every public
name of them is a name of this package too (``triage.triage(text)``).

Pure: the standard library, the failures parser, :mod:`run_end` (what a
run that did not end shows) and :mod:`answers` only.
"""
from hpctestlib_ml.triage.patterns import (BAD_INPUT, CATEGORIES,
                                           COMMUNICATION, CONSEQUENCES,
                                           DEFAULT_CATEGORY, END_CATEGORIES,
                                           FILESYSTEM, HARDWARE, NUMERICS,
                                           ORDER, OUT_OF_MEMORY,
                                           OWN_CATEGORIES, SCHEDULER, SOFTWARE)
from hpctestlib_ml.triage.lines import (REASON_LIMIT, Triage, classify,
                                        error_line, problems_category, step_of)
from hpctestlib_ml.triage.causes import (MIN_LOSS_SCALE, SUBMISSION_REFUSED,
                                         by_nature, hang, non_finite,
                                         stronger_evidence, submission_refused,
                                         wrong_answer)
from hpctestlib_ml.triage.detail import (architecture_missing,
                                         collective_timeout, with_detail)
from hpctestlib_ml.triage.recognise import (NO_FAILURE, NO_LOG, no_failure,
                                            unrecognised)
from hpctestlib_ml.triage.verdict import root_line, triage

__all__ = ['BAD_INPUT', 'CATEGORIES', 'COMMUNICATION', 'CONSEQUENCES',
           'DEFAULT_CATEGORY', 'END_CATEGORIES', 'FILESYSTEM', 'HARDWARE',
           'MIN_LOSS_SCALE', 'NO_FAILURE', 'NO_LOG', 'NUMERICS', 'ORDER',
           'OUT_OF_MEMORY', 'OWN_CATEGORIES', 'REASON_LIMIT', 'SCHEDULER',
           'SOFTWARE', 'SUBMISSION_REFUSED', 'Triage', 'architecture_missing',
           'by_nature', 'classify', 'collective_timeout', 'error_line', 'hang',
           'no_failure', 'non_finite', 'problems_category', 'root_line',
           'step_of', 'stronger_evidence', 'submission_refused', 'triage',
           'unrecognised', 'with_detail', 'wrong_answer']
