"""Megatron-LM training logs (pretrain_gpt.py), and the suite's Megatron-Core
fallback (src/gpt_pretrain), which prints the same lines.

The iteration line comes in two forms seen in the wild (one line each)::

    [2026-11-22 01:12:10] iteration        2/       6 | consumed samples:
    16 | elapsed time per iteration (ms): 1198.6 | throughput per GPU
    (TFLOP/s/GPU): 0.1 | learning rate: 1.000000E-04 | global batch size:
    8 | lm loss: 1.084813E+01 | ...

    [default3]: iteration       20/ 3125000 | consumed samples: 1920 |
    elapsed time per iteration (s): 5.3551 | ... | samples per second:
    17.927 | TFLOPs: 137.10 |

upstream Megatron-LM (ms, optional ``throughput per GPU``) and the patched
versions of BigScience/JUBE/CARAML (seconds, ``TFLOPs``). Launchers' labels
(torchrun's ``[defaultN]:``, srun's ``0:``, ...) are taken off first
(:mod:`~hpctestlib_ml.parsers.labels`). The model shape, and so the FLOPs
per token, come from what the log states of it: Megatron's argument dump,
an echoed command line, its vocabulary padding line
(:mod:`~hpctestlib_ml.parsers.megatron_args`).
"""
import math
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, megatron_args, timed_window

_ITERATION = re.compile(r'iteration\s+(\d+)/\s*(\d+)\s*\|(.*)')


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def _count(fields, name):
    value = fields.get(name, '')
    return int(value) if value.isdigit() else None


#: The loss fields, by preference: Megatron's training_log prints every
#: key of the model's loss dict; GPT, BERT and T5 name theirs ``lm loss``,
#: vision and diffusion models (Megatron-Core DiT) ``loss``.
_LOSS_KEYS = ('lm loss', 'loss')


def _loss(fields):
    '''The interval's training loss (None where the line prints none).'''
    for key in _LOSS_KEYS:
        if key in fields:
            return _number(fields[key])
    return None


def parse_iterations(text):
    '''Logged iterations in order (each once), as dicts: ``iteration``,
    ``train_iters``, ``time_s``, ``global_batch``, ``loss`` (None where the
    interval printed none), ``printed_tflops`` (None where the line has no
    TFLOP/s figure), ``consumed_samples``, ``skipped``, ``nan`` (the
    interval's skipped and NaN iteration counts, None where not printed),
    ``interval`` (iterations since the previous logged line) and
    ``loss_finite`` (False only where the line shows a non-finite loss).
    The loss is the ``lm loss`` field, else a plain ``loss`` (models whose
    loss dict names it so, e.g. Megatron-Core's DiT).

    Only fields closed by a ``|`` are read, so a line cut short (a copy, a
    killed job) gives no half-read number. Megatron prints the loss
    averaged over the interval's advanced iterations: an interval whose
    iterations the fp16 loss scaler all skipped has none (older versions
    print no ``lm loss``, current upstream ``lm loss: 0.0``); that is not a
    NaN. Non-finite: a NaN count above 0, a printed loss that is not
    finite, or no loss although some iterations advanced (older versions
    drop a NaN average from the line).'''
    steps, seen, previous = [], set(), 0
    for match in _ITERATION.finditer(text):
        iteration = int(match.group(1))
        fields = {}
        for part in match.group(3).split('|')[:-1]:
            key, sep, value = part.partition(':')
            if sep:
                fields[key.strip()] = value.strip()
        if 'elapsed time per iteration (ms)' in fields:
            time_s = _number(fields['elapsed time per iteration (ms)'])
            time_s = time_s / 1000 if time_s is not None else None
        else:
            time_s = _number(fields.get('elapsed time per iteration (s)', ''))
        if time_s is None or iteration in seen:
            continue
        seen.add(iteration)
        interval, previous = iteration - previous, iteration
        skipped = _count(fields, 'number of skipped iterations')
        nan = _count(fields, 'number of nan iterations')
        loss = _loss(fields)
        all_skipped = skipped is not None and skipped >= interval
        if all_skipped and loss == 0.0:
            loss = None                 # current upstream's "no average"
        advanced_without_loss = (loss is None and skipped is not None and
                                 not all_skipped)
        printed = fields.get('throughput per GPU (TFLOP/s/GPU)',
                             fields.get('TFLOPs'))
        steps.append({
            'iteration': iteration,
            'train_iters': int(match.group(2)),
            'time_s': time_s,
            'global_batch': int(fields['global batch size'])
            if 'global batch size' in fields else None,
            'loss': loss,
            'printed_tflops': _number(printed) if printed else None,
            'consumed_samples': int(fields['consumed samples'])
            if 'consumed samples' in fields else None,
            'skipped': skipped,
            'nan': nan,
            'interval': interval,
            'loss_finite': not ((nan or 0) > 0 or advanced_without_loss or
                                (loss is not None and
                                 not math.isfinite(loss))),
        })
    return steps


#: Megatron-LM's "using world size: 8, data-parallel size: 1, ..." and
#: Megatron-DeepSpeed's "using world size: 16, data-parallel-size: 8,
#: sequence-parallel size: 1, ..." (megatron/arguments.py, parse_args).
_WORLD = re.compile(r'using world size: (\d+), data-parallel[- ]size: (\d+)')


def world_size(text):
    '''The world size Megatron started with (its "using world size" line),
    else the argument dump's (or command line's), else None.'''
    match = _WORLD.search(text)
    if match:
        return int(match.group(1))
    return megatron_args.stated(text).get('world_size')


#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of Megatron logs: the names its JSON has always had
#: (the world size, read by the checks, was never printed).
JSON_NAMES = {'steps': 'iteration_last', 'loss_last': 'loss_last',
              'losses': 'losses', 'losses_finite': 'loss_all_finite',
              'timed_window': 'timed_window'}


def extract_metrics(text, seq_length=None, flops_per_token=None,
                    world_size=None):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them: its keys of old (``iteration_last`` for ``steps``,
    ``loss_all_finite`` for ``losses_finite``, True where no interval
    printed a loss).'''
    return training_log(text, seq_length, flops_per_token,
                        world_size).as_dict(JSON_NAMES,
                                            no_loss_is_finite=True)


def training_log(text, seq_length=None, flops_per_token=None, gpus=None):
    '''A Megatron run as a :class:`~hpctestlib_ml.metrics.TrainingLog`:
    ``steps``, its last logged iteration; ``world_size``, the one it
    started with (:func:`world_size`); ``losses``, the intervals' losses,
    in order (intervals without one left out); ``losses_finite``: False
    where a logged interval shows a non-finite loss
    (:func:`parse_iterations`). Figures: ``iterations`` (logged lines),
    ``train_iters`` (planned), ``skipped_iterations``, ``nan_iterations``
    (the intervals' counts summed) and :func:`_speed_figures`.

    *seq_length*, *flops_per_token* and *gpus* (what the per-GPU figure
    divides by: the job's ranks) default to the log's. Launchers' labels
    are taken off first.
    '''
    text = labels.strip(text)
    steps = parse_iterations(text)
    losses = [s['loss'] for s in steps if s['loss'] is not None]
    figures = {
        'iterations': len(steps),
        'train_iters': steps[-1]['train_iters'] if steps else None,
        'skipped_iterations': sum(s['skipped'] or 0 for s in steps),
        'nan_iterations': sum(s['nan'] or 0 for s in steps),
        **_speed_figures(text, steps, seq_length, flops_per_token, gpus),
    }
    return metrics.TrainingLog(
        steps=steps[-1]['iteration'] if steps else None,
        world_size=world_size(text), losses=losses,
        losses_finite=(metrics.losses_finite(losses)
                       if all(s['loss_finite'] for s in steps) else False),
        timed_window=timed_window.from_megatron(text), figures=figures)


def _speed_figures(text, steps, seq_length, flops_per_token, gpus):
    '''The speed of a Megatron run; the first logged interval (start-up,
    compilation, allocator warm-up) is skipped where there are more.

    ``time_per_iteration_secs``: mean seconds per iteration;
    ``tokens_per_second``: global batch x sequence length / that time;
    ``tflops_per_gpu``: the suite's own figure, Megatron's analytic model
    FLOPs per token (:func:`~hpctestlib_ml.flops.megatron_gpt_flops_per_token`:
    forward and backward, no recomputation, the s x s attention whole) x
    tokens/s / GPUs; ``flops_formula``: which form of it, for which model,
    read from where in the log, or which facts the log lacks
    (:func:`~hpctestlib_ml.parsers.megatron_args.model_flops`);
    ``printed_tflops_per_gpu``: the program's figure, for information only
    (formulas differ between versions). Shape and GPUs come from the
    arguments, else from the log; None where unknown.
    '''
    if flops_per_token is None:
        model = megatron_args.model_flops(text, seq_length)
        flops_per_token, formula = model.per_token, model.formula
    else:
        formula = 'given by the caller (the check\'s own model)'
    seq_length = seq_length or megatron_args.stated(text).get('seq_length')
    gpus = gpus or world_size(text)
    figures = dict.fromkeys(('time_per_iteration_secs', 'tokens_per_second',
                             'tflops_per_gpu', 'printed_tflops_per_gpu'))
    figures['flops_formula'] = formula
    steady = steps[1:] if len(steps) > 1 else steps
    if not steady:
        return figures

    seconds = statistics.fmean(s['time_s'] for s in steady)
    figures['time_per_iteration_secs'] = seconds
    printed = [s['printed_tflops'] for s in steady
               if s['printed_tflops'] is not None]
    if printed:
        figures['printed_tflops_per_gpu'] = statistics.fmean(printed)
    batch = steady[-1]['global_batch']
    if batch and seq_length and seconds > 0:
        tokens = batch * seq_length / seconds
        figures['tokens_per_second'] = tokens
        if flops_per_token and gpus:
            figures['tflops_per_gpu'] = tokens * flops_per_token / gpus / 1e12
    return figures


def departures(text):
    '''What the Megatron-Core fallback (``src/gpt_pretrain``) says it runs
    otherwise than Megatron-LM, from its ``> departures from Megatron-LM:
    ...`` line; None where it prints none or says ``none`` (Megatron-LM
    itself prints no such line).'''
    match = re.search(r'^> departures from Megatron-LM: (.*)$', text, re.M)
    if not match or match.group(1).strip() == 'none':
        return None
    return match.group(1).strip()
