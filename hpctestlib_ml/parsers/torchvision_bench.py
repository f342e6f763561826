"""Logs of PyTorch's synthetic CNN benchmarks on torchvision models: Horovod's
``examples/pytorch/pytorch_synthetic_benchmark.py``, the scripts that print
its lines (EESSI test-suite's ``PyTorch_torchvision``, BytePS's
``benchmark_byteps.py``, the suite's ``src/torchvision_resnet50``) and
CSCS's/LUMI's ``cnn_distr.py``.

Horovod's lines (rank 0 only; EESSI adds ``World size: N``)::

    Model: resnet50
    Batch size: 32
    Number of GPUs: 4
    Running warmup...
    Running benchmark...
    Iter #0: 108.3 img/sec per GPU
    ...
    Img/sec per GPU: 108.2 +-1.2
    Total img/sec on 4 GPU(s): 432.8 +-4.9

An iteration's figure is one rank's ``batch x batches per iteration /
seconds``; ``Img/sec per GPU`` is their mean and 1.96 x their population
standard deviation; ``Total`` both x N, the number of ranks (``CPU`` in
place of ``GPU`` on CPUs). cnn_distr.py's lines::

     * Rank 0 - Epoch  0: 522.19 images/sec per GPU
     * Total average: 16711.73 images/sec

an epoch's figure per GPU (25 batches), and their mean x world size x the
GPUs a rank sees: the world size is not printed, so it is inferred here as
the total over the mean (``world_size_inferred``). Lines may carry a
launcher's prefix (``0: ``, ``[0]<stdout>:``, ``[1,0]<stdout>:``) or
indentation: the patterns are unanchored, as EESSI's and CSCS's own. Where a
log holds several runs, the first one's figures are read (ReFrame's
``extractsingle``, which EESSI uses, takes the first match). Sources and
their figures: tests/data/SOURCES.md, tests/test_torchvision_resnet50.py.
Standard library only.
"""
import math
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

ITER_LINE = re.compile(r'Iter #(\d+):\s*([\d.]+) img/sec per ([CG]PU)')
PER_DEVICE_LINE = re.compile(
    r'Img/sec per ([CG]PU):\s*([\d.]+)\s*\+-\s*([\d.]+)')
TOTAL_LINE = re.compile(
    r'Total img/sec on (\d+) ([CG]PU)\(s\):\s*([\d.]+)\s*\+-\s*([\d.]+)')
COUNT_LINE = re.compile(r'(?:Number of [CG]PUs|World size):\s*(\d+)')
MODEL_LINE = re.compile(r'Model:\s*(\S+)')
BATCH_LINE = re.compile(r'Batch size:\s*(\d+)')
#: Printed by the suite's program only (upstream prints no such line).
BATCHES_PER_ITER_LINE = re.compile(r'Batches per iteration:\s*(\d+)')
CSCS_EPOCH_LINE = re.compile(
    r'Epoch\s+(\d+):\s+([\d.]+)\s+images/sec per ([CG]PU)')
CSCS_TOTAL_LINE = re.compile(r'Total average:\s*([\d.]+)\s+images/sec')


def _first_run(text, closing):
    '''*text* up to the end of the first *closing* line (a run's last),
    or all of it where there is none (a run cut short).'''
    match = closing.search(text)
    return text[:match.end()] if match else text


def parse_horovod(text):
    '''The Horovod-format figures of the first run; None without any
    ``Iter`` or ``Total`` line.'''
    run = _first_run(text, TOTAL_LINE)
    iters = ITER_LINE.findall(run)
    total = TOTAL_LINE.search(run)
    if not iters and not total:
        return None
    per_device = PER_DEVICE_LINE.search(run)
    count = COUNT_LINE.search(run)
    world = (int(total.group(1)) if total
             else int(count.group(1)) if count else None)
    unit = (total.group(2) if total else iters[0][2])
    return {
        'format': 'horovod', 'device': unit, 'world_size': world,
        'world_size_inferred': False,
        'images_per_second': float(total.group(3)) if total else None,
        'images_per_second_conf': float(total.group(4)) if total else None,
        'images_per_second_per_gpu': (float(per_device.group(2))
                                      if per_device else None),
        'images_per_second_per_gpu_conf': (float(per_device.group(3))
                                           if per_device else None),
        'iteration_images_per_second': [float(i[1]) for i in iters],
    }


def parse_cscs(text):
    '''cnn_distr.py's figures: per GPU the mean of the epoch lines (as
    CSCS's ``sn.avg``), the total as printed, the world size inferred
    from them; None without any of its lines.'''
    run = _first_run(text, CSCS_TOTAL_LINE)
    epochs = CSCS_EPOCH_LINE.findall(run)
    total = CSCS_TOTAL_LINE.search(run)
    if not epochs and not total:
        return None
    rates = [float(e[1]) for e in epochs]
    per_gpu = statistics.fmean(rates) if rates else None
    total_rate = float(total.group(1)) if total else None
    world = (round(total_rate / per_gpu)
             if total_rate is not None and per_gpu else None)
    return {
        'format': 'cscs', 'device': epochs[0][2] if epochs else None,
        'world_size': world, 'world_size_inferred': world is not None,
        'images_per_second': total_rate, 'images_per_second_conf': None,
        'images_per_second_per_gpu': per_gpu,
        'images_per_second_per_gpu_conf': None,
        'iteration_images_per_second': rates,
    }


def _int(pattern, text):
    match = pattern.search(text)
    return int(match.group(1)) if match else None


#: The suite's program's loss of each timed iteration (no upstream prints
#: one): ``[hpcml] iteration 0 loss 6.912345``.
LOSS_LINE = re.compile(r'\[hpcml\] iteration (\d+) loss (\S+)')

#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of these logs.
JSON_NAMES = {'steps': 'steps', 'world_size': 'world_size',
              'loss_last': 'loss_last', 'losses': 'losses',
              'losses_finite': 'losses_finite',
              'timed_window': 'timed_window'}


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them.'''
    return training_log(text).as_dict(JSON_NAMES)


def _float(text):
    try:
        return float(text)
    except ValueError:
        return math.nan


def training_log(text):
    '''A log of these benchmarks as a :class:`~hpctestlib_ml.metrics.
    TrainingLog`: ``steps`` (timed iterations x batches per iteration
    where the suite's program prints the latter; None upstream, whose
    batches per iteration the log does not say),
    ``world_size`` (the ``Total`` line's device count; inferred for
    cnn_distr.py), ``losses`` (the suite's program's loss of each
    iteration; none upstream), ``timed_window`` (the suite's ``[hpcml]
    timed region`` line), and the figures: ``images_per_second`` (the
    job's total as printed), ``images_per_second_per_gpu`` (per device:
    Horovod's printed mean, or the mean of cnn_distr.py's epochs), each
    with ``_conf`` (the printed ``+-``, 1.96 x the standard deviation; None
    for cnn_distr.py), ``iteration_images_per_second`` (each iteration's
    per-device figure), ``iterations``, ``device`` (``GPU``/``CPU``),
    ``model``, ``batch_size`` (per device), ``global_batch_size``,
    ``batches_per_iteration``, ``time_per_step_secs`` (batch / per-device
    rate), ``world_size_inferred`` and ``format`` (``horovod``, ``cscs``
    or None: neither's lines). Horovod's lines win where a log has both
    (the suite's program prints both).'''
    text = labels.strip(text)
    found = parse_horovod(text) or parse_cscs(text) or {
        'format': None, 'device': None, 'world_size': None,
        'world_size_inferred': False, 'images_per_second': None,
        'images_per_second_conf': None, 'images_per_second_per_gpu': None,
        'images_per_second_per_gpu_conf': None,
        'iteration_images_per_second': []}
    world = found.pop('world_size')
    model = MODEL_LINE.search(text)
    batch = _int(BATCH_LINE, text)
    per_iter = _int(BATCHES_PER_ITER_LINE, text)
    iterations = len(found['iteration_images_per_second'])
    per_gpu = found['images_per_second_per_gpu']
    losses = [_float(loss) for _, loss in LOSS_LINE.findall(text)]
    figures = {
        **found, 'model': model.group(1) if model else None,
        'batch_size': batch, 'iterations': iterations,
        'global_batch_size': batch * world if batch and world else None,
        'batches_per_iteration': per_iter,
        'time_per_step_secs': (batch / per_gpu if batch and per_gpu
                               and math.isfinite(per_gpu) else None),
    }
    return metrics.TrainingLog(
        steps=iterations * per_iter if per_iter else None,
        world_size=world, losses=losses,
        losses_finite=metrics.losses_finite(losses),
        timed_window=timed_window.from_suite_line(text), figures=figures)
