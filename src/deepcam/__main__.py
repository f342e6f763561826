"""python -m deepcam [options]: DeepLabV3+ segmentation, MLPerf-style logs.

Network: ``segmentation_models_pytorch.DeepLabV3Plus(encoder_weights=None,
in_channels=16, classes=3)``; ``reference`` size: 16 x 768 x 1152 fields and
an Xception-71 encoder (the backbone family of MLPerf HPC's DeepCAM),
``tiny``: 16 x 128 x 192 crops and a MobileNetV2 encoder. Loss: cross-entropy
weighted towards the rare classes, as DeepCAM's (weights from the class
frequencies of the labels, w_c ~ 1 / sqrt(freq_c)); quality: mean IoU over
the three classes on held-out batches, logged as ``eval_accuracy``.

Data: synthetic fields by default (noise with two label-dependent channels,
so the model has something to learn); or ``--data DIR`` of ``*.npz`` files
holding ``data`` (16, H, W) and ``labels`` (H, W).
"""
import pathlib
import sys

import numpy as np
import torch

from mlperf_train import argument_parser, run_main

#: (channels, height, width, encoder)
SIZES = {'tiny': (16, 128, 192, 'mobilenet_v2'),
         'reference': (16, 768, 1152, 'tu-xception71')}
CLASSES = 3


def parse_args(argv):
    p = argument_parser(__doc__, SIZES, batch_size=2)
    p.add_argument('--lr', type=float, default=1e-3)
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


def from_files(directory, batch, rank, world, generator):
    files = sorted(pathlib.Path(directory).glob('*.npz'))[rank::world]
    if not files:
        sys.exit(f'deepcam: error: no *.npz samples in {directory} for '
                 f'rank {rank}')
    while True:
        pick = torch.randint(len(files), (batch,), generator=generator)
        loaded = [np.load(files[i]) for i in pick.tolist()]
        yield (torch.tensor(np.stack([f['data'] for f in loaded]),
                            dtype=torch.float32),
               torch.tensor(np.stack([f['labels'] for f in loaded]),
                            dtype=torch.long))


def class_weights(labels):
    '''Inverse square root of the class frequencies, normalised to mean 1.'''
    counts = torch.bincount(labels.flatten(), minlength=CLASSES).float()
    weights = 1 / torch.sqrt(counts.clamp(min=1) / counts.sum())
    return weights / weights.mean()


def mean_iou(logits, labels):
    prediction = logits.argmax(1)
    ious = []
    for c in range(CLASSES):
        inter = ((prediction == c) & (labels == c)).sum()
        union = ((prediction == c) | (labels == c)).sum()
        if union > 0:
            ious.append(inter.float() / union.float())
    return torch.stack(ious).mean()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import segmentation_models_pytorch as smp

    from mlperf_train import (evaluate, finish, log_setup, run_steps,
                              start, supervised_step, wrap_ddp)

    rank, world, device, log = start('deepcam', args.seed)
    mlc = log.constants
    channels, height, width, encoder = SIZES[args.size]
    model = smp.DeepLabV3Plus(encoder_name=encoder, encoder_weights=None,
                              in_channels=channels, classes=CLASSES)
    model = model.to(device)
    params = sum(p.numel() for p in model.parameters())
    model = wrap_ddp(model, device, world)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed + rank)
    batches = (synthetic(args.batch_size, channels, height, width, generator)
               if args.data == 'synthetic' else
               from_files(args.data, args.batch_size, rank, world, generator))
    global_batch = args.batch_size * world
    log_setup(log, ((mlc.GLOBAL_BATCH_SIZE, global_batch),
                    (mlc.OPT_NAME, 'adamw'), (mlc.OPT_BASE_LR, args.lr),
                    ('model_parameters', params), ('world_size', world),
                    ('encoder', encoder),
                    ('sample_shape', [channels, height, width])))
    log.end(mlc.INIT_STOP)

    def weighted_cross_entropy(logits, labels):
        return torch.nn.functional.cross_entropy(
            logits, labels, weight=class_weights(labels).to(logits.device))

    model.train()
    step = supervised_step(model, batches, weighted_cross_entropy, optimizer,
                           device, args.precision)
    status = run_steps(log, step, args.steps, global_batch, device, world)
    log.event('eval_accuracy', evaluate(model, batches, args.eval_batches,
                                        mean_iou, device, world))
    finish(world)
    return 0 if status == 'success' else 1


if __name__ == '__main__':
    run_main(main)
