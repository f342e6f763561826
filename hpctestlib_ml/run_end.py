"""Whether a training log shows a run that ended, and where it does not,
what the log shows instead, in one line: what ``hpcml extract``,
``hpcml triage`` and ``hpcml compliance`` say of a run that is no result.

A run that did not end is not a result, whatever figures its log holds
(issue 39): the figures of a part of a run, or of a run that missed its
target, would stand beside whole runs in a report or a reference. So a
log is taken whole only where its run reached its end record, and where
it did not, :func:`unended` says which of these it shows:

``aborted``
    the program said so itself: MLPerf's ``run_stop`` with a status other
    than ``success`` (the reference programs and the suite's own write
    ``aborted`` for a run that spent its budget without reaching the
    quality target, or stopped at a non-finite loss). MLPerf's result
    summarizer drops such a run: it is no time to train
    (mlcommons/logging ``mlperf_logging/result_summarizer``: a result
    file whose compliance check fails, the target among its rules, is
    "non-converged" and left out; the RCP checker marks it infinite).
    The reason names the status and the quality reached against the
    target (:func:`hpctestlib_ml.parsers.mllog.quality`, the targets of
    MLPerf's own rules: :func:`quality_targets`);
``failed``
    the log shows why the run stopped: the scheduler ended it (time limit,
    cancellation, node failure), a rank died by a signal or exited with an
    error, a rank printed a traceback; the reason is :mod:`triage`'s
    (category and line);
``cut``
    the log ends in the middle of a line its format writes whole (an
    ``:::MLLOG`` record without its end, a Megatron iteration line
    without its last ``|``), or the run began and its format's end record
    never came (:data:`RUN_RECORDS`): the job was killed without a word,
    or the log was cut. The reason names the last step the log shows;
``budget``
    an MLPerf run that trained its whole sample or epoch budget without
    reaching its target, and whose log then has no ``run_stop``: its end
    was the budget, not a kill;
``no_step``
    the program started (its header, its argument dump) and stopped before
    its first measured step (tf_cnn_benchmarks in its warm-up, Megatron
    before its first iteration line).

A log whose run reached its end record (MLPerf's ``run_stop`` with status
``success``, Megatron's ``[after training is done]``, Trainer's
``train_runtime``, tf_cnn_benchmarks' ``total images/sec``) is a run that
ended, whatever else it printed after (a traceback at teardown does not
undo a measured run). Where a format has no end record, only a failure
the log shows makes it no result.

Standard library and the suite's parsers only, and MLPerf's rules where
the mlperf-logging package is installed (the quality targets).
"""
import dataclasses
import functools
import json
import pathlib
import re

from hpctestlib_ml.parsers import failures, labels, mllog

#: The kinds of :class:`End`, in the order :func:`unended` looks for them
#: (after MLPerf's own status).
KINDS = ('aborted', 'failed', 'cut', 'budget', 'no_step')

#: The longest reason, in characters (the triage reasons' limit).
REASON_LIMIT = 300


@dataclasses.dataclass(frozen=True)
class End:
    '''How a log's run did not end: its *kind* (one of :data:`KINDS`) and
    the one-line *reason*, what the log shows.'''
    kind: str
    reason: str


#: Logs that write a record when the run ends: (what shows the run
#: began, its pattern, the end record's name, its pattern). Megatron-LM's
#: "iteration N/ M |" lines and its "[after training is done]", or its
#: "exiting program at iteration N" where --exit-interval or
#: --exit-duration-in-mins ends the run (megatron/training/training.py);
#: HF Trainer's logged dicts and its train_runtime (Trainer.train's last
#: log); tf_cnn_benchmarks' step lines and its "total images/sec" (printed
#: once the timed steps are done, benchmark_cnn.py). MLPerf's run_start
#: and run_stop are read from whole records (:func:`_mlperf_records`): a
#: half line is no record.
RUN_RECORDS = (
    ("Megatron's training iterations",
     re.compile(r'iteration +\d+ */ *\d+ *\|'),
     '[after training is done]',
     re.compile(r'\[after training is done|'
                r'exiting program (?:at|after) ')),
    ("HF Trainer's logged losses", re.compile(r"\{'loss': "),
     'train_runtime', re.compile(r'train_runtime')),
    ("tf_cnn_benchmarks' step lines",
     re.compile(r'^[^\S\n]*\d+\s+images/sec:', re.MULTILINE),
     'total images/sec', re.compile(r'total images/sec:')),
)

#: Which of :data:`RUN_RECORDS` (by its position) belongs to which parser
#: (a module of :mod:`hpctestlib_ml.parsers`, by name).
_RECORDS_OF = {'megatron': 0, 'hf_trainer': 1, 'tf_cnn_benchmarks': 2}

#: The parser of MLPerf logs.
MLLOG = 'mllog'


def unended(text, parser=None):
    '''The :class:`End` of the run in log *text*, None where it ended (or
    the log shows neither an end nor a failure: a format with no end
    record). *parser*: the name of the format's parser
    (``mllog``, ``megatron``, ``hf_trainer``, ``tf_cnn_benchmarks``, ...),
    None for every format whose lines the log holds.'''
    if '\r\n' in text:
        text = text.replace('\r\n', '\n')
    text = labels.strip_hosts(text)
    bare = labels.strip(text)
    events = (mllog.parse_events(bare)
              if parser in (None, MLLOG) and mllog.MARKER in text else [])
    aborted = _mlperf_status(events)
    if aborted:
        return aborted
    if _ended(text, bare, events, parser):
        return None
    no_step = _no_measured_step(text, bare, parser)
    where = _last_where(bare, events, parser, no_step)
    return (_failure(text, where) or _cut_line(text, parser, where) or
            _mlperf_budget(text, events) or
            _no_end_record(text, bare, events, parser) or no_step)


def _trim(line):
    return failures.shorten(' '.join(line.split()), REASON_LIMIT)


def _last_line(text):
    '''The log's last non-blank line, without its launchers' labels.'''
    lines = [ln for ln in text.rstrip().rsplit('\n', 3) if ln.strip()]
    return labels.split(lines[-1])[1].strip() if lines else ''


# MLPerf ---------------------------------------------------------------


#: A quality target as MLPerf's compliance checker states it: "at least
#: one" evaluation with ``v['value'] >= 0.720`` (``<=`` for an error).
_TARGET = re.compile(r"v\['value'\]\s*(>=|<=)\s*([0-9]*\.?[0-9]+)")


def _ruleset_order(path):
    '''A ruleset directory's (usage, version) for sorting (``hpc_3.0.0``
    -> ('hpc', (3, 0, 0))); its warnings-only variants after.'''
    usage, _, version = path.name.partition('_')
    numbers = tuple(int(n) for n in re.findall(r'\d+', version))
    return usage, numbers, path.name


@functools.lru_cache(maxsize=None)
def quality_targets():
    '''MLPerf's quality targets, ``submission_benchmark`` -> (key, ``>=``
    or ``<=``, value), from the closed rules of mlcommons/logging's
    compliance checker (``compliance_checker/<usage>_<version>/closed_
    <benchmark>.yaml``: the ``eval_accuracy`` or ``eval_error`` key's
    ``ATLEAST_ONE_CHECK``), each benchmark's newest ruleset: the rule a
    run that misses it breaks, and why the result summarizer drops it.
    {} where the mlperf-logging package is not installed (then the
    reasons give the quality without its target).'''
    try:
        import yaml
        from mlperf_logging import compliance_checker
    except ImportError:
        return {}
    root = pathlib.Path(compliance_checker.__file__).parent
    targets = {}
    for ruleset in sorted((d for d in root.iterdir()
                           if d.is_dir() and '_' in d.name),
                          key=_ruleset_order):
        for path in ruleset.glob('closed_*.yaml'):
            try:
                rules = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError):
                continue
            for rule in rules if isinstance(rules, list) else ():
                key = rule.get('KEY') if isinstance(rule, dict) else None
                if not isinstance(key, dict) or key.get('NAME') not in (
                        'eval_accuracy', 'eval_error'):
                    continue
                found = _TARGET.search(str(key.get('ATLEAST_ONE_CHECK', '')))
                if found:
                    benchmark = path.stem[len('closed_'):]
                    targets[benchmark] = (key['NAME'], found.group(1),
                                          float(found.group(2)))
    return targets


def _mlperf_records(events):
    '''(run_start, run_stop, init_start) counts of whole MLLOG records.'''
    keys = [e['key'] for e in events]
    return (keys.count('run_start'), keys.count('run_stop'),
            keys.count('init_start'))


def _n(value):
    '''*value* as the log would print a count: 3297280, 0.5.'''
    return (str(int(value)) if float(value).is_integer() else f'{value:g}')


def _where(events):
    '''Where the run was when it ended, in the log's words: the largest
    in-run ``epoch_num`` of its evaluations, epochs and records (samples
    for MLPerf BERT, whose ``epoch_num`` counts them), and its last
    training step; None where it logged neither.'''
    run = mllog.in_run(events)
    benchmark = mllog.first_value(events, 'submission_benchmark')
    positions = [mllog._metadata(e).get('epoch_num') for e in run
                 if e['key'] in ('eval_accuracy', 'eval_error', 'epoch_stop',
                                 'block_stop', 'tracked_stats')]
    positions = [p for p in positions if isinstance(p, (int, float))]
    steps = mllog.training_steps(run) or next(
        (step for step, _ in reversed(mllog.tracked_stats(run))
         if isinstance(step, int)), None)
    if benchmark == 'bert' and positions:
        return f'after {_n(max(positions))} samples'
    words = ([f'epoch {_n(max(positions))}'] if positions else []) + (
        [f'step {steps}'] if steps else [])
    return f'at {", ".join(words)}' if words else None


def _mlperf_status(events):
    '''An ``aborted`` :class:`End` where a ``run_stop`` says a status
    other than ``success`` (or none); None.'''
    for event in events:
        if event['key'] != 'run_stop':
            continue
        status = mllog._metadata(event).get('status')
        if status == 'success':
            continue
        said = (f"status {status!r}" if status is not None else
                'no status')
        facts = [f for f in (mllog.quality(events, quality_targets()),
                             _where(events)) if f]
        return End('aborted', _trim(
            f"MLPerf's run_stop says {said}"
            + (f": {', '.join(facts)}" if facts else '')
            + ": MLPerf's result summarizer drops such a run (no time to "
            'train)'))
    return None


#: What an MLPerf BERT program's command line or argument dump says its
#: sample budget is: NVIDIA's ``run_pretraining.py`` stops at
#: ``--max_samples_termination`` samples or ``--max_steps`` steps
#: (``max_samples_termination=4500000.0`` in its Namespace print,
#: ``--max_samples_termination=4500000`` on the command line).
_MAX_SAMPLES = re.compile(r'max_samples_termination[=:\s]+(\d+(?:\.\d*)?)')
#: An epoch budget on a command line or in an argument print
#: (``--max_epochs 35``, ``max_epochs=35``, ``n_epochs: 64``).
_MAX_EPOCHS = re.compile(r'(?:--|\b)(?:max[_-]epochs|n[_-]epochs)'
                         r'[=:\s]+(\d+)\b')


def _number(value):
    return value if isinstance(value, (int, float)) and value > 0 else None


def _mlperf_budget(text, events):
    '''A ``budget`` :class:`End` where the run has ``run_start`` and no
    ``run_stop`` and its log shows the run trained its whole budget
    without reaching its target: its samples (BERT: the largest in-run
    ``epoch_num``, or an in-run ``train_samples``, which BERT logs when its
    training loop is over) at least ``opt_learning_rate_training_steps``
    x ``global_batch_size`` or a stated ``max_samples_termination``, or
    its last ``epoch_stop`` at a stated epoch budget; None.'''
    starts, stops, _ = _mlperf_records(events)
    if not starts or stops >= starts or \
            mllog.quality_met(events, quality_targets()):
        return None
    run = mllog.in_run(events)
    benchmark = mllog.first_value(events, 'submission_benchmark')
    spent = None
    if benchmark == 'bert':
        steps = _number(mllog.first_value(
            events, 'opt_learning_rate_training_steps'))
        batch = _number(mllog.first_value(events, 'global_batch_size'))
        budgets = [(steps * batch, f'{_n(steps)} steps x global batch '
                    f'{_n(batch)}')] if steps and batch else []
        budgets += [(float(v), 'max_samples_termination')
                    for v in _MAX_SAMPLES.findall(text)[-1:]]
        trained = [mllog._metadata(e).get('epoch_num') for e in run
                   if e['key'] in ('eval_accuracy', 'epoch_stop',
                                   'tracked_stats')]
        trained += [e.get('value') for e in run
                    if e['key'] == 'train_samples']
        trained = [t for t in trained if _number(t)]
        if budgets and trained:
            budget, how = min(budgets)
            if max(trained) >= budget:
                spent = (f'{_n(max(trained))} samples of its {_n(budget)} '
                         f'({how})')
    else:
        epochs = [mllog._metadata(e).get('epoch_num') for e in run
                  if e['key'] == 'epoch_stop']
        epochs = [e for e in epochs if _number(e)]
        budget = _MAX_EPOCHS.findall(text)
        if epochs and budget and max(epochs) >= int(budget[-1]):
            spent = f'epoch {_n(max(epochs))} of its {int(budget[-1])}'
    if spent is None:
        return None
    quality = mllog.quality(events, quality_targets())
    return End('budget', _trim(
        f'the run spent its budget without reaching the target: {spent}'
        + (f', {quality}' if quality else '')
        + "; the log then ends with no run_stop: MLPerf counts it as a run "
          'that did not converge, no time to train'))


# Every format ---------------------------------------------------------


def _ended(text, bare, events, parser):
    '''Whether the log (*bare*: without its labels) shows its run's end
    record: every MLPerf
    ``run_start`` its ``run_stop`` (those say success: :func:`unended`
    looked first), a format's end record (:data:`RUN_RECORDS`), or
    Megatron's last iteration line at its planned iterations
    (``iteration 10/ 10``).'''
    starts, stops, _ = _mlperf_records(events)
    if parser in (None, MLLOG) and starts:
        return stops >= starts
    for began, start, end_name, end in _records(parser):
        if end.search(text):
            return True
    if parser in (None, 'megatron'):
        # Its planned iterations all logged: the training loop is over (a
        # log copied up to its last iteration line has no end record).
        found = _MEGATRON_STEP.findall(bare)
        if found and int(found[-1][0]) >= int(found[-1][1]) > 0:
            return True
    return False


def _records(parser):
    '''The :data:`RUN_RECORDS` of *parser* (every one for None).'''
    if parser is None:
        return RUN_RECORDS
    at = _RECORDS_OF.get(parser)
    return (RUN_RECORDS[at],) if at is not None else ()


def _last_where(bare, events, parser, no_step=None):
    '''Where the run was when its log (*bare*: without its labels) ends,
    in words (the last step or samples it shows; before its first
    measured step where *no_step*, :func:`_no_measured_step`'s, says
    so); None.'''
    if events and mllog.in_run(events):
        return _where(events)
    names = [parser] if parser else list(_RECORDS_OF)
    where = next((w for w in (_last_step(bare, n) for n in names) if w), None)
    if where is None and no_step:
        return 'before its first measured step'
    return where


def _failure(text, where=None):
    '''A ``failed`` :class:`End` where the log shows why the run stopped
    (:func:`hpctestlib_ml.parsers.failures.failure_reason`: the scheduler
    ended it, a rank died or exited with an error, a traceback), in
    triage's words (its category and line), with *where* it was (its last
    step); None.'''
    if not failures.failure_reason(text):
        return None
    from hpctestlib_ml import triage
    found = triage.triage(text)
    reason = found.reason
    if found.category is None:
        reason = failures.failure_reason(text) or reason
    rank = (f' (rank {found.rank}{f" on {found.node}" if found.node else ""})'
            if found.rank and f'rank {found.rank}' not in reason else '')
    at = f' ({where})' if where else ''
    return End('failed', _trim(
        f'the run failed{at}: {found.category or "software"}: {reason}'
        f'{rank}'))


#: A Megatron iteration line as its program writes it: every field closed
#: by a ``|``; one without its last is cut.
_ITERATION_LINE = re.compile(r'iteration +\d+ */ *\d+ *\|')


def _cut_line(text, parser, where=None):
    '''A ``cut`` :class:`End` where the log's last line is one its format
    writes whole, cut in the middle: an ``:::MLLOG`` record that is no
    JSON object (``..."key": "run_stop", "value``), a Megatron iteration
    line without its closing ``|``; None.'''
    last = _last_line(text)
    if parser in (None, MLLOG) and mllog.MARKER in last:
        record = last[last.find(mllog.MARKER) + len(mllog.MARKER):]
        try:
            json.loads(record)
        except ValueError:
            key = re.search(r'"key": *"(\w+)"', record)
            what = f'its {key.group(1)} record' if key else 'an MLLOG record'
            return End('cut', _trim(
                f'the log is cut: it ends in the middle of {what} '
                f'({last[-60:]!r}'
                + (f', {where}' if where else '')
                + '): the job was killed without a word or the log was '
                'cut; no whole run_stop'))
    if parser in (None, 'megatron') and _ITERATION_LINE.search(last) and \
            not last.rstrip().endswith('|'):
        return End('cut', _trim(
            f'the log is cut: it ends in the middle of an iteration line '
            f'({last[:80]!r}...'
            + (f', {where}' if where else '')
            + '): the job was killed without a word or the log was cut; no '
            '[after training is done]'))
    return None


def _no_end_record(text, bare, events, parser):
    '''A ``cut`` :class:`End` where the log shows a run began and no end
    record after it: MLPerf's ``run_start`` (or ``init_start``) with no
    ``run_stop`` (``run_start``), a format's lines of :data:`RUN_RECORDS`
    without its end record; the reason names the last step it shows.'''
    starts, stops, inits = _mlperf_records(events)
    began = end_name = None
    if starts and stops < starts:
        began, end_name = "MLPerf's run_start", 'run_stop'
        where = _where(events)
    elif inits and not starts and not stops:
        began, end_name = "MLPerf's init_start", 'run_start'
        where = 'while it initialised'
    else:
        for name, start, end, _ in _records(parser):
            if start.search(text):
                began, end_name = name, end
                where = _last_step(bare, parser or _parser_of(name))
                break
    if began is None:
        return None
    return End('cut', _trim(
        f'the log ends mid-run: {began} but no {end_name}'
        + (f' ({where})' if where else '')
        + ': the job was killed without a word (SIGKILL, a lost node, a '
          'limit its scheduler reported elsewhere) or the log was cut; its '
          f'last line: {_last_line(text)[:120]}'))


def _parser_of(record_name):
    for parser, at in _RECORDS_OF.items():
        if RUN_RECORDS[at][0] == record_name:
            return parser
    return None


_MEGATRON_STEP = re.compile(r'iteration +(\d+) */ *(\d+) *\|')
_TRAINER_EPOCH = re.compile(r"'epoch': '?([\d.]+)")
_TF_STEP = re.compile(r'^[^\S\n]*(\d+)\s+images/sec:', re.MULTILINE)
_TF_BATCHES = re.compile(r'^[^\S\n]*Num batches:\s*(\d+)', re.MULTILINE)


def _last_step(bare, parser):
    '''The last step a log of *parser* (*bare*: without its labels)
    shows, in words; None.'''
    text = bare
    if parser == 'megatron':
        found = _MEGATRON_STEP.findall(text)
        if found:
            return f'last iteration {found[-1][0]} of {found[-1][1]}'
    if parser == 'hf_trainer':
        found = _TRAINER_EPOCH.findall(text)
        if found:
            return f'last logged epoch {found[-1]}'
    if parser == 'tf_cnn_benchmarks':
        found = _TF_STEP.findall(text)
        planned = _TF_BATCHES.search(text)
        if found:
            return (f'last step {found[-1]}'
                    + (f' of {planned.group(1)}' if planned else ''))
    return None


#: What shows a program of each format started, before its first measured
#: step: tf_cnn_benchmarks' header (``Model:``, ``Batch size:``, ``Running
#: warm up``: benchmark_cnn.py prints them before the warm-up steps, which
#: it does not time), Megatron's start (``using world size``, its
#: argument dump, ``[before the start of training step]``), HF Trainer's
#: ``***** Running training *****``.
_STARTED = {
    'tf_cnn_benchmarks': re.compile(
        r'^[^\S\n]*(?:Model:\s+\S|Batch size:\s+\d+ global|Running warm up)',
        re.MULTILINE),
    'megatron': re.compile(
        r'using world size: |-{8,} arguments -{8,}|\[before the start of '
        r'training step\]'),
    'hf_trainer': re.compile(r'\*{5} Running training \*{5}'),
}
#: What shows each format's first measured step.
_MEASURED = {
    'tf_cnn_benchmarks': re.compile(
        r'^[^\S\n]*\d+\s+images/sec:|total images/sec:', re.MULTILINE),
    'megatron': _ITERATION_LINE,
    'hf_trainer': re.compile(r"\{'loss': |\[hpcml\] step \d+/|"
                             r'train_runtime|train_samples_per_second'),
}


def _no_measured_step(text, bare, parser):
    '''A ``no_step`` :class:`End` where a program of *parser* (each
    format's, for None) started (:data:`_STARTED`) and the log (*bare*:
    without its labels) shows no measured step (:data:`_MEASURED`);
    None.'''
    names = [parser] if parser in _STARTED else (
        list(_STARTED) if parser is None else [])
    for name in names:
        if _STARTED[name].search(bare) and \
                not _MEASURED[name].search(bare):
            warm = (' (in its warm-up)' if name == 'tf_cnn_benchmarks' and
                    'Running warm up' in bare else '')
            return End('no_step', _trim(
                f'the run stopped before its first measured step{warm}: '
                f'{_PROGRAM[name]} started and logged no step; its last '
                f'line: {_last_line(text)[:120]}'))
    return None


_PROGRAM = {'tf_cnn_benchmarks': 'tf_cnn_benchmarks',
            'megatron': 'Megatron', 'hf_trainer': 'HF Trainer'}


def describe(end):
    '''*end* (an :class:`End`) in words: ``not a result (kind): reason``.'''
    return f'not a result ({end.kind}): {end.reason}'


def refusal(path, command, end):
    '''The one line a command says where it refuses *path*'s log, its run
    having ended as *end* (an :class:`End`).'''
    return f'hpcml {command}: {path}: {describe(end)}'
