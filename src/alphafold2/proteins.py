"""The program's proteins: synthetic ones, the features and targets of a
crop (supplementary Table 1, the masked MSA of 1.2.7), batches of them,
and the network of a size. Shared by the training loop
(:mod:`alphafold2.__main__`) and the prepared data's reader
(:mod:`alphafold2.data`), which import it and not each other.
"""
import torch

from alphafold2.geometry import GLYCINE

AMINO_ACIDS = 20
MSA_CLASSES = 23        # 20 amino acids, unknown, gap, mask
MASK_TOKEN = 22
#: The target's amino-acid one-hot in target_feat: 20 and unknown, then
#: the 'between segments' flag.
TARGET_AA = AMINO_ACIDS + 1


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
    (a :class:`alphafold2.sizes.Size`).'''
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
    '''The network of *size* (a :class:`alphafold2.sizes.Size`).'''
    from alphafold2.alphafold import AlphaFold2
    from alphafold2.model import Config
    return AlphaFold2(Config(**size.config),
                      checkpoint_blocks=size.checkpointing,
                      max_recycles=size.max_recycles, seed=seed)
