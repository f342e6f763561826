"""PyTorch ResNet-50 from torchvision on synthetic ImageNet-shaped data,
data-parallel (DDP): the ML benchmark that EESSI's test-suite and CSCS's
ReFrame tests run, so that a centre can set the suite's figure beside
theirs (``python -m torchvision_resnet50``, :mod:`.__main__`).

What they run:

- EESSI/test-suite
  ``eessi/testsuite/tests/apps/PyTorch/PyTorch_torchvision.py`` (209966b3):
  ``python pytorch_synthetic_benchmark.py --model resnet50`` (also vgg16,
  resnet152, densenet121, mobilenet_v3_large), ``--use-ddp`` over more
  than one task, ``--use-amp`` for its ``mixed`` precision, ``--no-cuda``
  on CPUs; every other argument at the script's default:
  batch 32 per rank, 10 warm-up batches, 10 iterations of 10 batches.
  Its ``src/pytorch_synthetic_benchmark.py`` is Horovod's
  ``examples/pytorch/pytorch_synthetic_benchmark.py`` (horovod/horovod
  2626dc87, unchanged since v0.21.0) with DDP and AMP added.
  It reads ``Total img/sec on [0-9]+ .PU\\(s\\):\\s+(?P<perf>\\S+)`` and
  ``Img/sec per GPU:\\s+(?P<perf_per_gpu>\\S+)`` (``per CPU`` on CPUs),
  and asserts ``Total img/sec on <num_tasks> .PU\\(s\\):.*``.
- eth-cscs/cscs-reframe-tests ``checks/apps/pytorch/pytorch_test_base.py``
  (2f813557): ``python cnn_distr.py``, one task per GPU: torchvision's
  resnet50, batch 512 per GPU, 2 warm-up epochs, 5 timed epochs of 25
  batches, SGD lr 0.01, DDP over NCCL; reference 980 images/s per GPU
  (-10%). It averages ``Epoch\\s+\\d+\\:\\s+(\\S+)\\s+images`` and reads
  ``Total average: (\\S+)\\s+images``. Its batches come from a DataLoader
  (two workers making ``torch.randn`` images per sample, copied to the
  GPU inside the timed epoch), where Horovod's and this program's are made
  once on the device. Its older ``pytorch_horovod_check.py`` runs ReFrame's
  ``hpctestlib/ml/pytorch/horovod.py``: Horovod v0.21.0's script with
  ``--batch-size 64 --num-iters 5 --num-batches-per-iter 5
  --num-warmup-batches 5``.

How the figure is computed (Horovod's script; EESSI's and this program's
alike): an iteration's rate is batch x batches per iteration / its
seconds, per rank; ``Img/sec per GPU: M +-C`` is the mean M of the
iterations' rates and C = 1.96 x their population standard deviation
(numpy's ``std``); ``Total img/sec on N GPU(s): N*M +-N*C`` for N ranks.
cnn_distr.py's ``Total average`` is the mean of its epochs' rates x world
size x the GPUs a rank sees (one, under CSCS's ``--gpus-per-task=1``).

This module holds the arithmetic and the lines (standard library only);
:mod:`.__main__` the training.
"""
import statistics

#: Upstream's confidence factor: ``img_sec_conf = 1.96 * np.std(img_secs)``.
CONFIDENCE = 1.96


def iteration_rate(batch_size, batches, seconds):
    '''Images/s of one rank over one iteration: Horovod's ``img_sec =
    args.batch_size * args.num_batches_per_iter / time``.'''
    return batch_size * batches / seconds


def summary(rates):
    '''(mean, 1.96 x population standard deviation) of the iterations'
    rates, as Horovod's ``np.mean`` and ``1.96 * np.std``.'''
    return statistics.fmean(rates), CONFIDENCE * statistics.pstdev(rates)


def iteration_line(index, rate, unit):
    '''Horovod's line for iteration *index*; *unit* ``GPU`` or ``CPU``.'''
    return 'Iter #%d: %.1f img/sec per %s' % (index, rate, unit)


def result_lines(mean, conf, world, unit):
    '''Horovod's two result lines: per device, and the job's total (the
    per-device figures x *world*).'''
    return ['Img/sec per %s: %.1f +-%.1f' % (unit, mean, conf),
            'Total img/sec on %d %s(s): %.1f +-%.1f' % (
                world, unit, world * mean, world * conf)]


def cscs_epoch_line(rank, epoch, rate, unit):
    '''cnn_distr.py's per-epoch line, for one of this program's
    iterations.'''
    return (f' * Rank {rank} - Epoch {epoch:2d}: {rate:.2f} images/sec '
            f'per {unit}')


def loss_line(index, loss):
    '''The suite's line of iteration *index*'s last training loss (no
    upstream prints one): the finite-loss check and the loss curve of the
    suite's references read it.'''
    return f'[hpcml] iteration {index} loss {loss:.6f}'


def cscs_total_line(total):
    '''cnn_distr.py's closing line (its mean x world size, one device per
    rank).'''
    return f' * Total average: {total:.2f} images/sec'
