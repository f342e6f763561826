"""Logs of tf_cnn_benchmarks (tensorflow/benchmarks, as CARAML runs it) and
of the suite's ``src/resnet50_tf``, which prints the same lines with the
same meaning.

Each process (a Horovod rank, or one process driving ``--num_gpus`` GPUs)
prints its configuration, then, after its warm-up::

    Batch size:  128 global
                 64 per device
    ...
    Step	Img/sec	total_loss
    1	images/sec: 154.5 +/- 0.0 (jitter = 0.0)	7.855
    ...
    ----------------------------------------------------------------
    total images/sec: 308.45
    ----------------------------------------------------------------

What the numbers mean, from ``scripts/tf_cnn_benchmarks/benchmark_cnn.py``
(tensorflow/benchmarks 00197155): a step line's images/sec is this
process's own running mean since the warm-up (its batch, over all its GPUs,
``get_perf_timing``), with its standard error and jitter (1.4826 x median
absolute deviation). ``total images/sec`` is the whole job's rate:
``num_workers x local_step x batch_size / elapsed_time``, where
``num_workers`` is ``hvd.size()`` under Horovod. So under Horovod every
rank prints its own estimate of the same job rate, not a share of it:
summing them over-counts by the number of ranks (CARAML's JUBE averages
them, as here). ``Batch size: G global`` and ``P per device`` give the
job's device count, G / P. Lines may carry a launcher's label
(``srun --label``: ``3: ``; Horovod's ``[1,0]<stdout>:``): they are taken
off first (:mod:`~hpctestlib_ml.parsers.labels`).
"""
import math
import re
import statistics

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

#: Indentation only: launchers' labels are taken off before.
_PREFIX = r'^[^\S\n]*'
STEP_LINE = re.compile(
    _PREFIX + r'(\d+)\s+images/sec:\s*([\d.]+)\s*\+/-\s*([\d.]+)\s*'
    r'\(jitter = ([\d.]+)\)\s+(\S+)', re.M)
TOTAL_LINE = re.compile(_PREFIX + r'total images/sec:\s*([\d.]+)', re.M)
BATCH_LINE = re.compile(_PREFIX + r'Batch size:\s*(\d+) global', re.M)
PER_DEVICE_LINE = re.compile(_PREFIX + r'\s*(\d+(?:\.\d+)?) per device', re.M)
MODEL_LINE = re.compile(_PREFIX + r'Model:\s*(\S+)', re.M)


def _float(text):
    try:
        return float(text)
    except ValueError:
        return math.nan


#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of these logs: the names its JSON has always had
#: (``workers`` for the world size).
JSON_NAMES = {'steps': 'steps', 'world_size': 'workers',
              'loss_last': 'loss_last', 'losses': 'losses',
              'losses_finite': 'losses_finite',
              'timed_window': 'timed_window'}


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them (``workers`` for ``world_size``; ``losses_finite`` True where no
    loss is logged, as always).'''
    return training_log(text).as_dict(JSON_NAMES, no_loss_is_finite=True)


def training_log(text):
    '''A tf_cnn_benchmarks log as a :class:`~hpctestlib_ml.metrics.
    TrainingLog`: ``steps`` (the last step number, 0 for none),
    ``world_size`` (how many processes printed the job's ``total
    images/sec``: under Horovod every rank does), ``losses`` (every logged
    step's loss, in order), and the figures: ``images_per_second``: the
    job's rate (the mean of the processes' ``total images/sec``, each an
    estimate of it); ``devices``: global batch / per-device batch (else one
    per process); ``images_per_second_per_gpu``: the job's rate / devices;
    ``time_per_step_secs``: global batch / the job's rate; ``model``,
    ``global_batch_size``.'''
    text = labels.strip(text)
    steps = STEP_LINE.findall(text)
    totals = [float(v) for v in TOTAL_LINE.findall(text)]
    losses = [_float(s[4]) for s in steps]
    batch = BATCH_LINE.search(text)
    per_device = PER_DEVICE_LINE.search(text)
    model = MODEL_LINE.search(text)
    global_batch = int(batch.group(1)) if batch else None
    devices = len(totals) or None
    if global_batch and per_device and float(per_device.group(1)) > 0:
        devices = round(global_batch / float(per_device.group(1)))
    job_rate = statistics.fmean(totals) if totals else None
    figures = {
        'model': model.group(1) if model else None,
        'global_batch_size': global_batch,
        'devices': devices,
        'images_per_second': job_rate,
        'images_per_second_per_gpu': (job_rate / devices
                                      if job_rate and devices else None),
        'time_per_step_secs': (global_batch / job_rate
                               if job_rate and global_batch else None),
    }
    return metrics.TrainingLog(
        steps=max((int(s[0]) for s in steps), default=0),
        world_size=len(totals), losses=losses,
        losses_finite=metrics.losses_finite(losses),
        timed_window=timed_window.from_suite_line(text), figures=figures)
