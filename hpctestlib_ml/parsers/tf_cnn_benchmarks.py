"""Logs of tf_cnn_benchmarks (tensorflow/benchmarks, as CARAML runs it) and
of the suite's ``src/resnet50_tf``, which prints the same lines.

Each worker (Horovod rank) prints, after its warm-up::

    Step	Img/sec	total_loss
    1	images/sec: 154.5 +/- 0.0 (jitter = 0.0)	7.855
    ...
    ----------------------------------------------------------------
    total images/sec: 308.45
    ----------------------------------------------------------------

Step lines carry the running mean of that worker's images/s since the
warm-up, its standard error and jitter (1.4826 x median absolute deviation);
``total images/sec`` is that worker's final figure over its devices. With one
worker per GPU, the job's throughput is the sum over the workers' totals.
Lines may carry a launcher's rank prefix (``srun --label``: ``3: ``).
"""
import math
import re

from hpctestlib_ml.parsers import timed_window

_PREFIX = r'^(?:\s*\d+:\s*)?'
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


def extract_metrics(text):
    '''``images_per_second`` (sum of the workers' totals), ``workers``
    (how many printed a total), ``images_per_second_per_gpu``, ``steps``
    (the last step number), ``time_per_step_secs`` (per-device batch over a
    worker's images/s, mean over workers), ``loss_last``,
    ``losses_finite``, ``model``, ``global_batch_size``.'''
    steps = STEP_LINE.findall(text)
    totals = [float(v) for v in TOTAL_LINE.findall(text)]
    losses = [_float(s[4]) for s in steps]
    batch = BATCH_LINE.search(text)
    per_device = PER_DEVICE_LINE.search(text)
    model = MODEL_LINE.search(text)
    metrics = {
        'model': model.group(1) if model else None,
        'global_batch_size': int(batch.group(1)) if batch else None,
        'steps': max((int(s[0]) for s in steps), default=0),
        'workers': len(totals),
        'images_per_second': sum(totals) if totals else None,
        'images_per_second_per_gpu': (sum(totals) / len(totals)
                                      if totals else None),
        'time_per_step_secs': None,
        'loss_last': losses[-1] if losses else None,
        'losses_finite': all(math.isfinite(v) for v in losses),
        'timed_window': timed_window.from_suite_line(text),
    }
    if per_device and totals and all(totals):
        local = float(per_device.group(1))
        metrics['time_per_step_secs'] = (
            sum(local / t for t in totals) / len(totals))
    return metrics
