"""python -m alphafold2 [options]: AlphaFold2 Evoformer training (the
MLPerf HPC OpenFold workload's trunk), MLPerf-style logs.

Sizes: ``reference`` (AlphaFold2's trunk: c_m 256, c_z 128, 48 blocks, crops
of 256 residues with 128 MSA clusters, each block recomputed in the backward
as OpenFold does) and ``tiny`` (c_m 128, c_z 64, 2 blocks, 64 residues, 32
sequences). Data: synthetic proteins: a random sequence, an MSA of mutated
copies (30% substitutions) and a chain of C-alpha positions 3.8 A apart,
whose pair distances are the distogram targets. Adam (lr 1e-3, as
AlphaFold2), gradient clipping at 0.1 (supplementary 1.11.3), batch 1 per
rank (AlphaFold2's). Quality: the distogram's top-1 bin accuracy on
held-out proteins (``eval_accuracy``).

The log is MLPerf HPC's OpenFold benchmark's in structure, in its open
division at every size: the trunk is not the whole AlphaFold2 model that
the closed rules fix (their parameter count, recycling, templates, extra
MSA), and the distogram accuracy is not their lDDT-Ca.
"""
import sys

import torch

from mlperf_train import argument_parser, run_main

#: Per size: (Config kwargs, crop residues, MSA sequences, checkpointing).
SIZES = {
    'tiny': (dict(c_m=128, c_z=64, blocks=2, msa_heads=4, pair_heads=2,
                  c_hidden=32, c_opm=16, c_tri_mul=64), 64, 32, False),
    'reference': (dict(), 256, 128, True),
}
AMINO_ACIDS = 20
MSA_CLASSES = 23        # 20 amino acids, unknown, gap, mask


def parse_args(argv):
    # --data takes only 'synthetic': OpenFold reads mmCIF files and
    # alignments, which this program does not (main() says so).
    return argument_parser(__doc__, SIZES, batch_size=1).parse_args(argv)


def synthetic_proteins(batch, crop, msa_depth, generator):
    '''Yield (features, distogram bins) of synthetic proteins.'''
    from alphafold2.model import distogram_bins
    one_hot = torch.nn.functional.one_hot
    while True:
        aatype = torch.randint(AMINO_ACIDS, (batch, crop), generator=generator)
        mutate = torch.rand(batch, msa_depth, crop, generator=generator) < 0.3
        mutate[:, 0] = False                       # row 0 is the target
        msa = torch.where(mutate, torch.randint(
            AMINO_ACIDS + 2, (batch, msa_depth, crop), generator=generator),
            aatype[:, None])
        msa_one_hot = one_hot(msa, MSA_CLASSES).float()
        profile = msa_one_hot.mean(1, keepdim=True).expand_as(msa_one_hot)
        zeros = torch.zeros(batch, msa_depth, crop, 1)
        msa_feat = torch.cat([msa_one_hot, zeros, zeros, profile, zeros], -1)
        target_feat = torch.cat([one_hot(aatype, TARGET_AA).float(),
                                 torch.zeros(batch, crop, 1)], -1)
        start = torch.randint(1000, (batch, 1), generator=generator)
        residue_index = start + torch.arange(crop)
        # A persistent random walk of 3.8 A steps: a compact-ish chain.
        steps = torch.randn(batch, crop, 3, generator=generator)
        steps = steps + 0.7 * torch.roll(steps, 1, 1)
        steps = 3.8 * steps / steps.norm(dim=-1, keepdim=True)
        coords = steps.cumsum(1)
        yield (target_feat, residue_index, msa_feat), distogram_bins(coords)


#: target_feat one-hot width: 20 amino acids and unknown (plus the
#: 'between segments' flag, zero here).
TARGET_AA = AMINO_ACIDS + 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.data != 'synthetic':
        sys.exit('alphafold2: error: --data takes only "synthetic"; real '
                 'proteins need OpenFold\'s data pipeline (run OpenFold '
                 'itself for the MLPerf HPC dataset)')
    from alphafold2.model import Config, Evoformer
    from mlperf_train import (evaluate, log_evaluation, log_setup, start,
                              stop, supervised_step, train, wrap_ddp)

    rank, world, device, log = start('openfold', args, 'open')
    mlc = log.constants
    config, crop, msa_depth, checkpointing = SIZES[args.size]
    cfg = Config(**config)
    model = Evoformer(cfg, checkpoint_blocks=checkpointing).to(device)
    params = sum(p.numel() for p in model.parameters())
    model = wrap_ddp(model, device, world)
    global_batch = args.batch_size * world
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-6)
    generator = torch.Generator().manual_seed(args.seed + rank)
    proteins = synthetic_proteins(args.batch_size, crop, msa_depth,
                                  generator)
    log_setup(log, ((mlc.GLOBAL_BATCH_SIZE, global_batch),
                    (mlc.OPT_NAME, 'adam'), (mlc.OPT_BASE_LR, 1e-3),
                    ('model_parameters', params), ('world_size', world),
                    ('evoformer_blocks', cfg.blocks),
                    ('crop_size', crop), ('msa_depth', msa_depth),
                    ('activation_checkpointing', checkpointing),
                    # Synthetic proteins: the run's training set is what
                    # it generates.
                    (mlc.TRAIN_SAMPLES, args.steps * global_batch),
                    (mlc.EVAL_SAMPLES, args.eval_batches * global_batch)))
    log.end(mlc.INIT_STOP)

    cross_entropy = torch.nn.CrossEntropyLoss()

    def distogram_loss(logits, bins):
        return cross_entropy(logits.float().flatten(0, -2), bins.flatten())

    # Gradient norm clipped at 0.1 (AlphaFold2 supplementary 1.11.3).
    step = supervised_step(model, proteins, distogram_loss, optimizer, device,
                           args.precision, clip_grad_norm=0.1)

    model.train()
    status = train(log, step, args.steps, global_batch, device, world)
    # Distogram top-1 accuracy (every crop has as many pairs, so the mean
    # over crops and ranks is the accuracy over all pairs).
    log_evaluation(log, 'eval_accuracy', lambda: evaluate(
        model, proteins, args.eval_batches,
        lambda logits, bins: (logits.argmax(-1) == bins).float().mean(),
        device, world, args.precision))
    return stop(log, status, world)


if __name__ == '__main__':
    run_main(main)
