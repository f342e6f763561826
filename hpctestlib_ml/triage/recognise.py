"""A log that shows no failure: a run that did not end, a file that holds
no training log, or a run that ended well."""
import re

from hpctestlib_ml import run_end
from hpctestlib_ml.triage.lines import Triage, _error_lines, _trim, classify


def no_failure(text):
    '''The :class:`Triage` of a log that shows no failure, category None:
    a file that holds no training log (:func:`unrecognised`), a run that
    did not end (:func:`hpctestlib_ml.run_end.unended`: aborted by its
    program, cut, its budget spent with no end record, stopped before its
    first measured step), else a run that ended well.'''
    end = run_end.unended(text)
    if end:
        return Triage(None, _trim(end.reason))
    why = unrecognised(text)
    if why:
        return Triage(None, f'{NO_LOG}: {why}')
    return Triage(None, NO_FAILURE)


#: The reason of a log that ended well.
NO_FAILURE = 'no failure found in the log'
#: The start of the reason of a file that holds no training log.
NO_LOG = 'no training log recognised'

#: Lines of a training run, its launcher or its framework, beyond the
#: error lines the tables know: MLPerf's events, the suite's records,
#: Megatron's iteration line, HF Trainer's logged dict, OpenCLIP's "Train
#: Epoch: 0 [...]", tf_cnn_benchmarks' and Horovod's images/sec, a loss
#: or a step with its number; srun's, slurmstepd's, torchrun's,
#: torch.distributed's and NCCL's lines; a Python traceback.
_TRAINING_LOG = re.compile(
    r':::MLLOG|\[hpcml\] |\biteration +\d+ */ *\d+ *\||'
    r"\{'(?:loss|train_runtime|eval_loss)': |Train Epoch: \d|"
    r'[Ii]mg/sec|images/sec|'
    r'(?<![A-Za-z])[Ll]oss\w*\s*[:=]?\s*[-+]?(?:\d|nan\b|NaN\b|inf\b)|'
    r'\b(?:[Ss]tep|[Ii]ter(?:ation)?|[Ee]poch)\W{0,3}\d|'
    r'^srun: |slurmstepd|torchrun|torch\.distributed|NCCL INFO|'
    r'Traceback \(most recent call last\)', re.MULTILINE)

#: The share of undecodable characters (read as U+FFFD) and NULs above
#: which a file is binary data, not a log.
_BINARY_SHARE = 0.01


def unrecognised(text):
    '''Why *text* holds no training log (empty, binary data, or not one
    line :data:`_TRAINING_LOG` or a table knows); None where it holds
    one.'''
    if _TRAINING_LOG.search(text):
        return None
    if not text.strip():
        return ('the file is empty: give the job\'s output (its stdout and '
                'stderr)')
    odd = text.count('\ufffd') + text.count('\x00')
    if odd > _BINARY_SHARE * len(text):
        return ('the file is binary data, not text: give the job\'s output '
                '(its stdout and stderr)')
    if any(classify(line) for line in _error_lines(text)):
        return None
    return ('no line of a training run, its launcher or an error that '
            'triage knows: give the job\'s output (its stdout and stderr)')
