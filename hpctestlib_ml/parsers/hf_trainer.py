"""Hugging Face Trainer output: its metric tables and logged dicts, and the
suite's per-step lines (src/gpt2_finetune).

``trainer.log_metrics(split, metrics)`` prints (transformers 4.x and 5.x)::

    ***** train metrics *****
      epoch                    =        3.0
      train_runtime            = 0:01:23.45
      train_samples_per_second =     34.012

Runtimes are H:MM:SS.ss there (``datetime.timedelta``; "1 day, 2:03:04.5"
past a day): hours count 3600 s. Logged dicts look like
``{'loss': '6.248', 'grad_norm': '2.756', 'epoch': '0.03571'}`` (values
quoted in 5.x, bare numbers in 4.x). The suite's program adds
``[hpcml] step 3/8 time 0.0665 s samples 8`` per optimizer step (global
samples), from which the steady-state rate is computed: Trainer's own
``train_samples_per_second`` includes start-up and the first steps.

Launchers' labels (``[worker :11]`` of a TPU pod's ``gcloud ... ssh
--worker=all``, Open MPI's ``[1,0]<stdout>:``, srun's ``0:``, ...) are
taken off first (:mod:`~hpctestlib_ml.parsers.labels`); a log collector may
also have taken off the rows' indentation (Cloud Logging's export of a GKE
job), so a row is any ``name = value`` line under the table's title.
"""
import ast
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

# A row's name is any metric key: compute_metrics may return names such as
# 'F1-score' (Trainer prints 'eval_F1-score'), so not only \w.
_TABLE = re.compile(r'\*{5} (\w+) metrics \*{5}[^\S\n]*\n'
                    r'((?:[^\S\n]*[^\s=]+[^\S\n]+=.*\n?)+)')
_ROW = re.compile(r'^[^\S\n]*([^\s=]+)[^\S\n]+=[^\S\n]+(.+?)\s*$',
                  re.MULTILINE)
_RUNTIME = re.compile(r'^(?:(\d+) days?, )?(\d+):(\d\d):(\d\d(?:\.\d+)?)$')
_STEP = re.compile(r'\[hpcml\] step (\d+)/(\d+) time ([\d.]+) s samples (\d+)')
_WORLD = re.compile(r'\[hpcml\] model .*? world size (\d+)')
_SHAPE = re.compile(r'\[hpcml\] model .*? vocabulary (\d+), layers (\d+), '
                    r'width (\d+), block size (\d+)')
_LOG_DICT = re.compile(r"^\s*(\{'loss': .*\})\s*$", re.MULTILINE)


def parse_value(text):
    '''A table value as a number: H:MM:SS.ss -> seconds, "12.3GF" -> 12.3e9.'''
    text = text.strip()
    match = _RUNTIME.match(text)
    if match:
        days, hours, minutes, seconds = match.groups()
        return (int(days or 0) * 86400 + int(hours) * 3600 +
                int(minutes) * 60 + float(seconds))
    units = {'GF': 1e9, 'TF': 1e12, 'PF': 1e15}
    if text[-2:] in units:
        return float(text[:-2]) * units[text[-2:]]
    try:
        return float(text)
    except ValueError:
        return text


def metric_tables(text):
    '''{split: {name: value}} of every ``***** split metrics *****`` table
    (the last one of a split wins).'''
    tables = {}
    for match in _TABLE.finditer(text):
        tables[match.group(1)] = {k: parse_value(v)
                                  for k, v in _ROW.findall(match.group(2))}
    return tables


def step_times(text):
    '''[(step, max_steps, seconds, global samples)] of the suite's lines.'''
    return [(int(a), int(b), float(t), int(n))
            for a, b, t, n in _STEP.findall(text)]


def losses(text):
    '''Training losses of Trainer's logged dicts, in order.'''
    values = []
    for line in _LOG_DICT.findall(text):
        try:
            values.append(float(ast.literal_eval(line)['loss']))
        except (ValueError, SyntaxError, KeyError):
            continue
    return values


def model_shape(text):
    '''(vocabulary, layers, width, block size) of the model the suite's
    program built, from its ``[hpcml] model`` line; None without one.'''
    match = _SHAPE.search(text)
    return tuple(int(v) for v in match.groups()) if match else None


#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of Trainer logs: the names its JSON has always had.
JSON_NAMES = {name: name for name in (
    'steps', 'world_size', 'loss_first', 'loss_last', 'losses',
    'losses_finite', 'timed_window')}


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them (``losses_finite`` True where no loss is logged, as always).'''
    return training_log(text).as_dict(JSON_NAMES, no_loss_is_finite=True)


def training_log(text):
    '''Trainer's figures and the suite's steady-state rate, as a
    :class:`~hpctestlib_ml.metrics.TrainingLog`: ``steps`` (the suite's
    step lines, one per optimizer step), ``world_size`` (its ``[hpcml]
    model`` line's), ``losses`` (Trainer's logged dicts'), and the figures:

    ``train_samples_per_second``, ``train_runtime`` (s), ``train_loss``,
    ``eval_loss``, ``perplexity``: Trainer's tables; ``max_steps``: the
    steps the run planned (its step lines'); ``model_shape``:
    :func:`model_shape`; ``samples_per_second``: global samples over the
    time of all steps but the first (warm-up), from the step lines;
    ``samples_per_second_per_gpu``: that / world size;
    ``time_per_step_secs``: their mean time. Launchers' labels are taken
    off first.
    '''
    text = labels.strip(text)
    tables = metric_tables(text)
    train, evaluation = tables.get('train', {}), tables.get('eval', {})
    steps = step_times(text)
    world = _WORLD.search(text)
    world = int(world.group(1)) if world else None
    loss_values = losses(text)
    figures = {
        'train_samples_per_second': train.get('train_samples_per_second'),
        'train_runtime': train.get('train_runtime'),
        'train_loss': train.get('train_loss'),
        'eval_loss': evaluation.get('eval_loss'),
        'perplexity': evaluation.get('perplexity'),
        'max_steps': steps[-1][1] if steps else None,
        'model_shape': model_shape(text),
        'samples_per_second': None,
        'samples_per_second_per_gpu': None,
        'time_per_step_secs': None,
    }
    steady = steps[1:] if len(steps) > 1 else steps
    if steady:
        seconds = sum(s[2] for s in steady)
        if seconds > 0:
            figures['samples_per_second'] = sum(s[3] for s in steady) / seconds
            figures['time_per_step_secs'] = statistics.fmean(
                s[2] for s in steady)
            if world:
                figures['samples_per_second_per_gpu'] = (
                    figures['samples_per_second'] / world)
    return metrics.TrainingLog(
        steps=len(steps), world_size=world, losses=loss_values,
        losses_finite=metrics.losses_finite(loss_values),
        timed_window=timed_window.from_suite_line(text), figures=figures)
