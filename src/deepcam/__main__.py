"""python -m deepcam [options]: DeepCAM climate segmentation (MLPerf HPC),
MLPerf-style logs.

Network: the reference DeepLabv3+ (:mod:`deepcam.model`, 56,454,720
parameters), ``reference`` size on 16 x 768 x 1152 fields, ``tiny`` (the
same architecture, narrower) on 16 x 128 x 192 crops. Training as the
MLPerf HPC reference (mlcommons/hpc ``deepcam/src/deepCam``): cross-entropy
with fixed class weights freq^-0.125 from the dataset's class frequencies,
averaged over pixels; AdamW (eps 1e-6, weight decay 1e-2; the reference's
run script uses LAMB, which needs NVIDIA apex; its rules allow Adam, AdamW
or LAMB); a multistep schedule with linear warm-up. Quality: the
reference's IoU (per sample, the mean over the three classes of
TP / (TP + FP + FN), a class absent from both counting 1), on held-out
batches, logged as ``eval_accuracy``.

Data: synthetic fields by default (noise with two label-dependent channels,
so the model has something to learn); or ``--data DIR`` of ``*.npz`` files
holding ``data`` (16, H, W) and ``labels`` (H, W).
"""
import pathlib
import sys

import numpy as np
import torch

from deepcam.architecture import CLASSES, SIZES
import input_paths
from mlperf_train import argument_parser, run_main

#: The reference's class frequencies of its training set (background,
#: cyclones, rivers) and its loss weights, frequency ** -0.125.
CLASS_FREQUENCIES = (0.986267818390377, 0.0004578708870701058,
                     0.01327431072255291)
LOSS_WEIGHT_POWER = -0.125

#: Samples of the MLPerf HPC DeepCAM dataset (its closed rules check them).
REFERENCE_TRAIN_SAMPLES = 121266
REFERENCE_EVAL_SAMPLES = 15158


def parse_args(argv):
    p = argument_parser(__doc__, SIZES, batch_size=2)
    p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--weight-decay', type=float, default=1e-2)
    p.add_argument('--lr-warmup-steps', type=int, default=400,
                   help="linear warm-up from 0 (the reference run's 400)")
    p.add_argument('--lr-milestones', type=int, nargs='*', default=[800],
                   help='steps after the warm-up where the rate decays')
    p.add_argument('--lr-decay-rate', type=float, default=0.1)
    return p.parse_args(argv)


def synthetic(batch, channels, height, width, generator):
    '''Background with a cyclone-like disc (class 1) and a river-like band
    (class 2) per sample; channels 0 and 1 carry them, the rest is noise.'''
    ys = torch.arange(height).view(-1, 1)
    xs = torch.arange(width).view(1, -1)
    while True:
        x = torch.randn(batch, channels, height, width, generator=generator)
        y = torch.zeros(batch, height, width, dtype=torch.long)
        for b in range(batch):
            cy, cx = (torch.rand(2, generator=generator) *
                      torch.tensor([height, width])).long().tolist()
            r = max(2, height // 12)
            y[b][(ys - cy) ** 2 + (xs - cx) ** 2 < r * r] = 1
            row = int(torch.randint(height, (1,), generator=generator))
            y[b][(ys - row - (xs * height) // (3 * width)).abs() < r // 2] = 2
        x[:, 0] += 2.0 * (y == 1)
        x[:, 1] += 2.0 * (y == 2)
        yield x, y


def sample_files(directory, rank, world):
    '''(this rank's ``*.npz`` files, how many the directory holds).'''
    files = sorted(pathlib.Path(directory).glob('*.npz'))
    mine = files[rank::world]
    if not mine:
        sys.exit(f'deepcam: error: no *.npz samples in {directory} for '
                 f'rank {rank}')
    return mine, len(files)


def from_files(files, batch, generator):
    while True:
        pick = torch.randint(len(files), (batch,), generator=generator)
        loaded = [np.load(files[i]) for i in pick.tolist()]
        yield (torch.tensor(np.stack([f['data'] for f in loaded]),
                            dtype=torch.float32),
               torch.tensor(np.stack([f['labels'] for f in loaded]),
                            dtype=torch.long))


def class_weights():
    return torch.tensor(CLASS_FREQUENCIES) ** LOSS_WEIGHT_POWER


def weighted_cross_entropy(logits, labels):
    '''The reference's loss: per-pixel weighted cross-entropy, averaged
    over the pixels (not normalised by the weights).'''
    return torch.nn.functional.cross_entropy(
        logits.float(), labels, weight=class_weights().to(logits.device),
        reduction='none').mean()


def iou(logits, labels):
    '''The reference's IoU: per sample, the mean over classes of TP / (TP
    + FP + FN), a class absent from prediction and label counting 1; the
    mean over the batch.'''
    prediction = logits.argmax(1).flatten(1)
    labels = labels.flatten(1)
    scores = []
    for c in range(CLASSES):
        p, t = prediction == c, labels == c
        union = (p | t).sum(1).float()
        inter = (p & t).sum(1).float()
        scores.append(torch.where(union > 0, inter / union.clamp(min=1),
                                  torch.ones_like(union)))
    return torch.stack(scores, 1).mean(1).mean()


def lr_factor(warmup, milestones, decay):
    '''The reference's MultiStepLRWarmup (warm-up factor 1): linear from 0
    over *warmup* steps, then x *decay* at each milestone after it.'''
    def factor(step):
        if step <= warmup:
            return step / warmup if warmup else 1.0
        return decay ** sum(step >= m + warmup + 1 for m in milestones)
    return factor


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    input_paths.require_data('deepcam', args.data)
    from deepcam.model import build
    from mlperf_train import (Batches, evaluate, log_evaluation, log_setup,
                              start, stop, supervised_step, train, wrap_ddp)

    rank, world, device, log = start(
        'deepcam', args, 'closed' if args.size == 'reference' else 'open')
    mlc = log.constants
    channels, height, width, _ = SIZES[args.size]
    model = build(args.size).to(device)
    params = sum(p.numel() for p in model.parameters())
    model = wrap_ddp(model, device, world)
    betas = (0.9, 0.999)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr,
                                  betas=betas, eps=1e-6,
                                  weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(
        args.lr_warmup_steps, args.lr_milestones, args.lr_decay_rate))
    generator = torch.Generator().manual_seed(args.seed + rank)
    global_batch = args.batch_size * world
    if args.data == 'synthetic':
        source = synthetic(args.batch_size, channels, height, width,
                           generator)
        # A synthetic run's training set: the samples it generates.
        train_samples = args.steps * global_batch
    else:
        files, train_samples = sample_files(args.data, rank, world)
        source = from_files(files, args.batch_size, generator)
    batches = Batches(source, device, args.steps,
                      pooled=args.data == 'synthetic')
    log_setup(log, (
        (mlc.GLOBAL_BATCH_SIZE, global_batch),
        ('num_workers', world),
        ('batchnorm_group_size', 1),          # batch norm per rank
        ('gradient_accumulation_frequency', 1),
        ('checkpoint', None),
        (mlc.OPT_NAME, 'AdamW'), ('opt_lr', args.lr),
        ('opt_betas', list(betas)), ('opt_eps', 1e-6),
        ('opt_weight_decay', args.weight_decay), ('opt_amsgrad', False),
        ('scheduler_type', 'multistep'),
        ('scheduler_milestones', args.lr_milestones),
        ('scheduler_decay_rate', args.lr_decay_rate),
        ('scheduler_lr_warmup_steps', args.lr_warmup_steps),
        ('scheduler_lr_warmup_factor', 1.0),
        (mlc.TRAIN_SAMPLES, train_samples),
        (mlc.EVAL_SAMPLES, args.eval_batches * global_batch),
        ('model_parameters', params),
        ('sample_shape', [channels, height, width])))
    log.end(mlc.INIT_STOP)

    model.train()
    step = supervised_step(model, batches, weighted_cross_entropy, optimizer,
                           device, args.precision, scheduler=scheduler)
    status = train(log, step, args.steps, global_batch, device, world,
                   batches=batches)
    log_evaluation(log, 'eval_accuracy', lambda: evaluate(
        model, source, args.eval_batches, iou, device, world))
    return stop(log, status, world)


if __name__ == '__main__':
    run_main(main)
