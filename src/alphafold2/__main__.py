"""python -m alphafold2 [options]: AlphaFold2 training as MLPerf HPC's
OpenFold benchmark runs it (OpenFold's initial training), MLPerf-style
logs.

Sizes: ``reference`` (OpenFold's initial-training model, 93,229,082
parameters: 48 Evoformer blocks with c_m 256 and c_z 128, 4 extra-MSA
blocks, 2 template pair blocks, the structure module and the heads; crops
of 256 residues with 124 MSA clusters, 1024 extra sequences and 4
templates, up to 3 recycles, every block recomputed in the backward as
OpenFold does) and ``tiny`` (the same architecture narrower and
shallower: c_m 128, c_z 64, 2 Evoformer blocks, 1 extra-MSA and 1
template block; 64 residues, 32 clusters, 64 extra sequences, 2
templates, up to 1 recycle). Data: synthetic proteins (a random sequence,
an MSA and extra MSA of mutated copies, a backbone along a persistent
random walk of 3.8 A steps and templates that are noisy copies of it), or
``--data DIR`` of OpenFold-format records (:mod:`alphafold2.data`). Adam
(lr 1e-3 from the first step, eps 1e-6: MLPerf HPC OpenFold's benchmark
schedule, no warm-up), gradient clipping at 0.1, weight averaging (decay
0.9) for evaluation, batch 1 per rank. Loss: OpenFold's initial training
(:mod:`alphafold2.losses`).
Quality: lDDT-Ca of the predicted structure on held-out proteins
(``eval_accuracy``), MLPerf HPC's target 0.8.
"""
import collections
import sys

import torch

from alphafold2.geometry import GLYCINE
from mlperf_train import argument_parser, run_main

Size = collections.namedtuple('Size', 'config crop msa_depth extra_msa '
                              'templates max_recycles checkpointing warmup')

SIZES = {
    'tiny': Size(dict(c_m=128, c_z=64, blocks=2, msa_heads=4, pair_heads=2,
                      c_hidden=32, c_opm=16, c_tri_mul=64, c_s=128, c_e=32,
                      extra_blocks=1, c_t=32, template_blocks=1,
                      template_heads=2, ipa_heads=4, c_resnet=64,
                      c_plddt=64),
                 64, 32, 64, 2, 1, False, 0),
    # MLPerf HPC OpenFold's closed rules: 124 clusters (with 4 template
    # rows, OpenFold's 128), 1024 extra sequences, 4 templates, crop 256,
    # 3 recycles; no warm-up (--warmup_lr_iters 0, the reference's
    # default and its README's command: mlcommons/hpc 2c627d4
    # openfold/train.py, openfold/README.md).
    'reference': Size(dict(), 256, 124, 1024, 4, 3, True, 0),
}
AMINO_ACIDS = 20
MSA_CLASSES = 23        # 20 amino acids, unknown, gap, mask
MASK_TOKEN = 22
#: The target's amino-acid one-hot in target_feat: 20 and unknown, then
#: the 'between segments' flag.
TARGET_AA = AMINO_ACIDS + 1
#: Learning rate, Adam's epsilon, the gradient clip and the weight
#: average's decay: OpenFold's and MLPerf HPC's closed rules.
LEARNING_RATE, ADAM_EPS, CLIP_NORM, AVERAGE_DECAY = 1e-3, 1e-6, 0.1, 0.9
#: The warm-up's first learning rate (the reference's --warmup_lr_init).
WARMUP_INIT_LR = 1e-5
#: MLPerf HPC OpenFold's quality target.
TARGET_LDDT_CA = 0.8


def parse_args(argv):
    return argument_parser(__doc__, SIZES, batch_size=1).parse_args(argv)


def learning_rate(iteration, warmup, base=LEARNING_RATE,
                  init=WARMUP_INIT_LR):
    '''The learning rate of *iteration* (from 1) as MLPerf HPC OpenFold's
    OpenFoldBenchmarkLRScheduler sets it (mlcommons/hpc 2c627d4
    openfold/openfold/lr_scheduler.py): *warmup* iterations along a line
    from *init* (iteration 1) to *base* (iteration *warmup*), then
    *base*; with no warm-up, *base* from the first.'''
    if iteration > warmup:
        return base
    if warmup == 1:
        return init
    return round(init + (base - init) * (iteration - 1) / (warmup - 1), 10)


def backbone_from_ca(ca):
    '''N and C atoms beside each C-alpha [..., R, 3] (1.46 and 1.52 A
    bonds), placed in the plane of its neighbours: a backbone whose
    frames (Alg. 21) turn along the chain as a protein's do.'''
    prev = torch.cat([2 * ca[..., :1, :] - ca[..., 1:2, :],
                      ca[..., :-1, :]], -2)
    nxt = torch.cat([ca[..., 1:, :], 2 * ca[..., -1:, :] -
                     ca[..., -2:-1, :]], -2)
    tangent = nxt - prev
    tangent = tangent / tangent.norm(dim=-1, keepdim=True)
    out = ca - (prev + nxt) / 2
    # The chain's ends have one neighbour: their neighbours' direction.
    out = torch.cat([out[..., 1:2, :], out[..., 1:-1, :],
                     out[..., -2:-1, :]], -2)
    out = out - tangent * (out * tangent).sum(-1, keepdim=True)
    out = out / out.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    return ca - 1.2 * tangent + 0.84 * out, ca + 1.25 * tangent + 0.87 * out


def deletion_value(count):
    '''Table 1's deletion_value: 2 / pi arctan(d / 3).'''
    return 2 / torch.pi * torch.arctan(count / 3)


def bert_mask(msa, generator):
    '''(masked MSA, mask) as AlphaFold2 masks the MSA for its masked-MSA
    loss (1.2.7): 15% of the positions, of which 70% become the mask
    token, 10% a random amino acid, 10% a residue drawn from the column's
    profile (another row's) and 10% stay.'''
    rows, residues = msa.shape
    masked = torch.rand(msa.shape, generator=generator) < 0.15
    choice = torch.rand(msa.shape, generator=generator)
    uniform = torch.randint(AMINO_ACIDS, msa.shape, generator=generator)
    other = torch.randint(rows, msa.shape, generator=generator)
    profile = msa.gather(0, other)
    replaced = torch.where(choice < 0.7, MASK_TOKEN, torch.where(
        choice < 0.8, uniform, torch.where(choice < 0.9, profile, msa)))
    return torch.where(masked, replaced, msa), masked


def protein_example(aatype, n, ca, c, msa, extra_msa, template_aatype,
                    template_ca, template_n, template_c, generator,
                    residue_index=None, residue_mask=None, resolved=None,
                    template_mask=1, pseudo_beta_x=None, deletions=None,
                    seq_mask=None):
    '''(features, target) of one protein crop, batch of one, from its
    residues [R], backbone atoms [R, 3], MSA [S, R] and extra MSA [E, R]
    (classes 0-21 of :data:`MSA_CLASSES`) and templates ([T, R] residues,
    [T, R, 3] atoms): the features of supplementary Table 1, the MSA
    BERT-masked (15%, 1.2.7), the targets of the losses. *residue_mask*
    [R]: residues with a resolved backbone (default all); *resolved*
    [R, 37]: resolved atoms (default: those that exist); *template_mask*
    0: no templates (their features zero); *pseudo_beta_x* [R, 3]: the
    distogram's atoms (default: C-beta placed ideally, C-alpha for
    glycine); *deletions*: the MSA's and extra MSA's deletion counts
    (default none); *seq_mask* [R]: the crop's residues, 0 where it is
    padded past the chain's end (default all). The features end with the
    model's masks (:class:`alphafold2.alphafold.AlphaFold2`): every MSA,
    extra-MSA row and template covers the sequence's residues.'''
    from alphafold2 import templates
    from alphafold2.geometry import (backbone_torsions,
                                     frames_from_three_points, pseudo_beta)
    from alphafold2.model import distogram_bins
    one_hot = torch.nn.functional.one_hot
    residues = aatype.shape[0]
    msa_in, masked = bert_mask(msa, generator)
    msa_one_hot = one_hot(msa_in, MSA_CLASSES).float()
    profile = one_hot(msa, MSA_CLASSES).float().mean(0, keepdim=True) \
        .expand_as(msa_one_hot)
    if deletions is None:
        deletions = (torch.zeros(msa.shape), torch.zeros(extra_msa.shape))
    msa_del, extra_del = (d.float()[..., None] for d in deletions)
    msa_feat = torch.cat([
        msa_one_hot, msa_del.clamp(max=1), deletion_value(msa_del), profile,
        deletion_value(msa_del.mean(0, keepdim=True)).expand_as(msa_del)],
        -1)
    extra_msa_feat = torch.cat([one_hot(extra_msa, MSA_CLASSES).float(),
                                extra_del.clamp(max=1),
                                deletion_value(extra_del)], -1)
    target_feat = torch.cat([one_hot(aatype, TARGET_AA).float(),
                             torch.zeros(residues, 1)], -1)
    if residue_index is None:
        residue_index = torch.arange(residues)
    template_mask = torch.full(template_aatype.shape, float(template_mask))
    pair_feat = templates.template_pair_features(
        template_aatype, template_ca, template_mask) * \
        template_mask.amax(-1)[:, None, None, None]
    t_torsions, t_mask = backbone_torsions(template_n, template_ca,
                                           template_c)
    angle_feat = templates.template_angle_features(
        template_aatype, t_torsions, t_mask) * template_mask[..., None]
    if residue_mask is None:
        residue_mask = torch.ones(residues)
    if seq_mask is None:
        seq_mask = torch.ones(residues)
    masks = (seq_mask, seq_mask.expand(msa.shape[0], residues),
             seq_mask.expand(extra_msa.shape[0], residues),
             template_mask.amax(-1))
    torsions, torsion_mask = backbone_torsions(n, ca, c)
    if pseudo_beta_x is None:
        pseudo_beta_x = pseudo_beta(frames_from_three_points(n, ca, c),
                                    aatype)
    # An angle is defined where the residues it spans are resolved.
    before = torch.cat([torch.zeros(1), residue_mask[:-1]])
    after = torch.cat([residue_mask[1:], torch.zeros(1)])
    torsion_mask = torsion_mask * torch.stack(
        [residue_mask * before, residue_mask * before, residue_mask * after]
        + [residue_mask] * 4, -1)
    atom_mask = torch.zeros(residues, 37)
    atom_mask[:, [0, 1, 2, 4]] = 1                  # N, CA, C, O
    atom_mask[:, 3] = (aatype != GLYCINE).float()    # CB
    features = (target_feat, residue_index, msa_feat, extra_msa_feat,
                pair_feat, angle_feat) + masks
    target = {'backbone': torch.stack([n, ca, c], -2), 'ca': ca,
              'torsions': torsions, 'torsion_mask': torsion_mask,
              'distogram': distogram_bins(pseudo_beta_x[None])[0],
              'msa': msa,
              'msa_mask': masked.float(),
              'resolved': atom_mask if resolved is None else resolved,
              'atom_mask': atom_mask, 'residue_mask': residue_mask,
              'seq_mask': seq_mask}
    return (tuple(t[None] for t in features),
            {k: v[None] for k, v in target.items()})


def synthetic_proteins(batch, size, generator):
    '''Yield (features, target) batches of synthetic proteins of *size*
    (a :class:`Size`).'''
    while True:
        examples = [synthetic_protein(size, generator) for _ in range(batch)]
        yield collate(examples)


def synthetic_protein(size, generator):
    crop = size.crop

    def mutated(aatype, rows, rate):
        mutate = torch.rand(rows, crop, generator=generator) < rate
        return torch.where(mutate, torch.randint(
            AMINO_ACIDS + 2, (rows, crop), generator=generator), aatype)

    aatype = torch.randint(AMINO_ACIDS, (crop,), generator=generator)
    msa = mutated(aatype, size.msa_depth, 0.3)
    msa[0] = aatype                                  # row 0 is the target
    extra_msa = mutated(aatype, size.extra_msa, 0.4)
    # A persistent random walk of 3.8 A steps: a compact-ish chain.
    steps = torch.randn(crop, 3, generator=generator)
    steps = steps + 0.7 * torch.roll(steps, 1, 0)
    steps = 3.8 * steps / steps.norm(dim=-1, keepdim=True)
    ca = steps.cumsum(0)
    n, c = backbone_from_ca(ca)
    noise = 2.0 * torch.randn(size.templates, crop, 3, generator=generator)
    t_ca = ca + noise
    t_n, t_c = backbone_from_ca(t_ca)
    t_aatype = mutated(aatype, size.templates, 0.2).clamp(max=AMINO_ACIDS)
    start = int(torch.randint(1000, (), generator=generator))
    return protein_example(aatype, n, ca, c, msa, extra_msa, t_aatype,
                           t_ca, t_n, t_c, generator,
                           start + torch.arange(crop))


def collate(examples):
    '''One batch from (features, target) examples of equal crop.'''
    features = tuple(torch.cat(f) for f in zip(*(e[0] for e in examples)))
    target = {k: torch.cat([e[1][k] for e in examples])
              for k in examples[0][1]}
    return features, target


def build_model(size, seed=0):
    from alphafold2.alphafold import AlphaFold2
    from alphafold2.model import Config
    return AlphaFold2(Config(**size.config),
                      checkpoint_blocks=size.checkpointing,
                      max_recycles=size.max_recycles, seed=seed)


def lddt_ca(out, target):
    '''MLPerf HPC OpenFold's metric: lDDT-Ca of the final structure.'''
    from alphafold2.losses import lddt
    ca = out['frames'].translations[-1].float()
    return lddt(ca, target['ca'], target['residue_mask']).mean()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from alphafold2 import losses
    from mlperf_train import (Batches, autocast, grad_scaler,
                              log_evaluation, log_setup, start, stop, train,
                              to_device, wrap_ddp)
    size = SIZES[args.size]
    # Open at every size: the loss has no side-chain FAPE and no chi-angle
    # loss (README), whose closed-rule weights (0.5, 1.0) the log would
    # otherwise claim; every other closed rule holds at the reference size
    # (tests/test_compliance.py).
    rank, world, device, log = start('openfold', args, 'open')
    mlc = log.constants
    generator = torch.Generator().manual_seed(args.seed + rank)
    if args.data == 'synthetic':
        proteins = synthetic_proteins(args.batch_size, size, generator)
        held_out = synthetic_proteins(args.batch_size, size, torch.Generator(
        ).manual_seed(10_000 + args.seed + rank))
    else:
        from alphafold2 import data
        try:
            proteins = data.openfold_batches(args.data, 'train', size,
                                             args.batch_size, generator,
                                             rank, world)
            held_out = data.openfold_batches(args.data, 'eval', size,
                                             args.batch_size, generator,
                                             rank, world)
        except data.DataError as error:
            sys.exit(f'alphafold2: error: {error}')
    # One seed on every rank: the number of recycles agrees between them.
    model = build_model(size, seed=args.seed).to(device)
    params = sum(p.numel() for p in model.parameters())
    average = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(
            AVERAGE_DECAY))
    model = wrap_ddp(model, device, world)
    global_batch = args.batch_size * world
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE,
                                 eps=ADAM_EPS)
    warmup = size.warmup
    # LambdaLR's n counts from 0: the reference's iteration n + 1.
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda n: learning_rate(n + 1, warmup) / LEARNING_RATE)
    w = losses.WEIGHTS
    log_setup(log, (
        (mlc.GLOBAL_BATCH_SIZE, global_batch),
        (mlc.OPT_NAME, 'Adam'), (mlc.OPT_BASE_LR, LEARNING_RATE),
        ('opt_adam_beta_1', 0.9), ('opt_adam_beta_2', 0.999),
        ('opt_adam_epsilon', ADAM_EPS), ('opt_weight_decay', 0.0),
        ('opt_amsgrad', False), ('opt_gradient_clipping', True),
        ('opt_gradient_clip_norm', CLIP_NORM),
        ('opt_learning_rate_warmup_init', WARMUP_INIT_LR),
        ('opt_learning_rate_warmup_steps', warmup),
        ('swa_enabled', True), ('swa_decay_rate', AVERAGE_DECAY),
        ('model_parameters', params), ('model_parameters_count', params),
        ('world_size', world), ('evoformer_blocks', size.config.get(
            'blocks', 48)),
        ('train_sequence_crop_size', size.crop), ('crop_size', size.crop),
        ('max_msa_clusters', size.msa_depth), ('msa_depth', size.msa_depth),
        ('max_extra_msa', size.extra_msa), ('templates_enabled', True),
        ('max_templates', size.templates),
        ('num_recycling_iters', size.max_recycles),
        ('activation_checkpointing', size.checkpointing),
        # OpenFold's keys for what this loss has: backbone FAPE over all
        # layers 0.5; no side-chain FAPE and no chi loss (0 here, 0.5 and
        # 1.0 in OpenFold), in their place the final layer's backbone FAPE
        # and Alg. 27 on the backbone torsions (alphafold2.losses).
        ('fape_loss_weight', 1.0),
        ('fape_loss_backbone_weight', w['backbone_fape']),
        ('fape_loss_sidechain_weight', 0.0),
        ('fape_loss_final_backbone_weight', w['final_backbone_fape']),
        ('supervised_chi_loss_weight', 0.0),
        ('backbone_torsion_loss_weight', w['backbone_torsion']),
        ('angle_norm_loss_weight', w['angle_norm']),
        ('violation_loss_weight', 0.0),
        ('loss_scale', 'sqrt(crop residues)'),
        ('distogram_loss_weight', w['distogram']),
        ('masked_msa_loss_weight', w['masked_msa']),
        ('plddt_loss_weight', w['plddt']),
        ('experimentally_resolved_loss_weight',
         w['experimentally_resolved']),
        ('target_avg_lddt_ca_value', TARGET_LDDT_CA),
        ('train_max_pdb_release_date', '2021-09-16'),
        ('val_min_cameo_submission_date', '2021-09-17'),
        ('val_max_cameo_submission_date', '2021-12-11'),
        ('val_max_sequence_length', 700), ('val_every_iters', 40),
        ('initial_training_dataloader_type', 'InitialTrainingDataloaderPT'),
        # Synthetic proteins: the run's training set is what it generates.
        (mlc.TRAIN_SAMPLES, args.steps * global_batch),
        (mlc.EVAL_SAMPLES, args.eval_batches * global_batch)))
    batches = Batches(proteins, device, args.steps,
                      pooled=args.data == 'synthetic')
    log.end(mlc.INIT_STOP)

    clamp_draws = torch.Generator().manual_seed(args.seed)
    scaler = grad_scaler(device, args.precision)

    def step(_):
        features, target = next(batches)
        target = dict(target)               # the pool's copy stays whole
        with autocast(device, args.precision):
            out = model(*features)
        from alphafold2.geometry import frames_from_three_points
        backbone = target.pop('backbone')
        target['frames'] = frames_from_three_points(
            *backbone.float().unbind(-2))
        # FAPE is clamped in 90% of the batches (1.9.2).
        clamp = bool(torch.rand((), generator=clamp_draws) < 0.9)
        loss, _ = losses.alphafold_loss(out, target, clamp)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        average.update_parameters(model.module if world > 1 else model)
        return loss.item()

    def evaluate():
        net = average.module.eval()
        values = []
        with torch.no_grad():
            for _ in range(args.eval_batches):
                features, target = to_device(next(held_out), device)
                with autocast(device, args.precision):
                    out = net(*features)
                values.append(lddt_ca(out, target))
        value = torch.stack(values).mean()
        if world > 1:
            torch.distributed.all_reduce(value)
            value /= world
        return value.item()

    model.train()
    status = train(log, step, args.steps, global_batch, device, world,
                   batches=batches)
    if args.eval_batches:
        log_evaluation(log, 'eval_accuracy', evaluate)
    return stop(log, status, world)


if __name__ == '__main__':
    run_main(main)
