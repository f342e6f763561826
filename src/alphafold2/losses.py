"""AlphaFold2's initial-training loss (supplementary 1.9, Eq. 7) and
lDDT-Ca, MLPerf HPC OpenFold's quality metric:

    L = 0.5 L_FAPE + 0.5 L_aux + 0.3 L_dist + 2.0 L_msa + 0.01 L_conf

with the experimentally-resolved loss computed at weight 0 (the paper adds
it, at 0.01, in fine-tuning only; OpenFold's initial training alike).
FAPE and the torsion loss cover the backbone: the synthetic proteins have
no side chains, and OpenFold-format records supply the torsions they
have."""
import torch
from torch.nn.functional import binary_cross_entropy_with_logits, \
    cross_entropy

from alphafold2.heads import PLDDT_BINS

#: Eq. 7's weights for initial training.
WEIGHTS = {'fape': 0.5, 'aux': 0.5, 'distogram': 0.3, 'masked_msa': 2.0,
           'plddt': 0.01, 'experimentally_resolved': 0.0}
#: FAPE clamps distances at 10 A and divides by Z = 10 A (1.9.2).
FAPE_CLAMP = FAPE_SCALE = 10.0
#: lDDT: pairs closer than 15 A in the true structure, thresholds 0.5,
#: 1, 2 and 4 A (Alg. 29, Mariani et al. 2013).
LDDT_CUTOFF = 15.0
LDDT_THRESHOLDS = (0.5, 1.0, 2.0, 4.0)


def fape(pred_frames, true_frames, pred_x, true_x, mask=None,
         clamp=FAPE_CLAMP, eps=1e-4):
    '''Alg. 28: the mean, over frames i and atoms j, of the distance
    between atom j seen from frame i in the prediction and in the truth,
    clamped and divided by Z. Frames batch [..., F], atoms [..., A, 3];
    *mask* [..., F] for frames and atoms alike (backbone: one atom per
    frame) or None.'''
    pred = pred_frames.unsqueeze(-1).invert_apply(pred_x[..., None, :, :])
    true = true_frames.unsqueeze(-1).invert_apply(true_x[..., None, :, :])
    d = torch.sqrt(((pred - true) ** 2).sum(-1) + eps)
    d = d.clamp(max=clamp) / FAPE_SCALE if clamp else d / FAPE_SCALE
    if mask is None:
        return d.mean((-1, -2))
    pair = mask[..., :, None] * mask[..., None, :]
    return (d * pair).sum((-1, -2)) / pair.sum((-1, -2)).clamp_min(1)


def torsion_loss(angles, true, mask):
    '''Alg. 27 on the backbone torsions: squared distance of the
    normalised (cos, sin) to the truth over the angles *mask* marks, plus
    0.02 x the angle-norm penalty on every prediction. *angles*
    [..., R, 7, 2] unnormalised.'''
    norm = angles.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    squared = ((angles / norm - true) ** 2).sum(-1)
    torsion = (squared * mask).sum((-1, -2)) / mask.sum((-1, -2)).clamp_min(
        1)
    return torsion + 0.02 * (norm[..., 0] - 1).abs().mean((-1, -2))


def lddt(pred_x, true_x, mask=None, per_residue=False):
    '''lDDT of C-alpha positions [..., R, 3] (Alg. 29 lines 1-6): for every
    pair i != j within 15 A in the truth, the fraction of the thresholds
    its distance error stays under; averaged over all such pairs (OpenFold
    and MLPerf HPC: ``lddt_ca``) or per residue i.'''
    true_d = torch.cdist(true_x, true_x)
    pred_d = torch.cdist(pred_x, pred_x)
    residues = true_x.shape[-2]
    scored = (true_d < LDDT_CUTOFF) & ~torch.eye(
        residues, dtype=torch.bool, device=true_x.device)
    if mask is not None:
        scored = scored & (mask[..., :, None] * mask[..., None, :]).bool()
    scored = scored.to(true_d.dtype)
    error = (true_d - pred_d).abs()
    score = sum((error < t).to(true_d.dtype) for t in LDDT_THRESHOLDS) / \
        len(LDDT_THRESHOLDS)
    dims = (-1,) if per_residue else (-1, -2)
    return (score * scored).sum(dims) / (scored.sum(dims) + 1e-10)


def alphafold_loss(out, target, clamp=True):
    '''(total, {name: value}): Eq. 7 on the model's outputs *out* and a
    batch's *target* (a dict: ``frames`` the true backbone Frames [B, R],
    ``ca``, ``torsions``, ``torsion_mask``, ``distogram``, ``msa``,
    ``msa_mask``, ``resolved``, ``atom_mask``, ``residue_mask``). *clamp*:
    FAPE clamped at 10 A (AlphaFold2 clamps 90% of its batches).'''
    mask = target['residue_mask']
    frames = out['frames']                      # [layers, B, R]
    true_frames, true_ca = target['frames'], target['ca']
    per_layer = fape(frames, true_frames, frames.translations, true_ca,
                     mask, FAPE_CLAMP if clamp else None)  # [layers, B]
    terms = {'fape': per_layer[-1].mean(),
             'aux': (per_layer.mean(0) + torsion_loss(
                 out['angles'], target['torsions'],
                 target['torsion_mask'] * mask[..., None]).mean(0)).mean()}
    pair_mask = mask[..., :, None] * mask[..., None, :]
    dist = cross_entropy(out['distogram'].float().permute(0, 3, 1, 2),
                         target['distogram'], reduction='none')
    terms['distogram'] = (dist * pair_mask).sum() / pair_mask.sum()
    msa = cross_entropy(out['masked_msa'].float().permute(0, 3, 1, 2),
                        target['msa'], reduction='none')
    terms['masked_msa'] = (msa * target['msa_mask']).sum() / \
        target['msa_mask'].sum().clamp_min(1)
    # pLDDT's target: each residue's lDDT-Ca in the final structure,
    # no gradient into the structure (1.9.6).
    ca = frames.translations[-1].detach().float()
    bins = (lddt(ca, true_ca, mask, per_residue=True) * PLDDT_BINS).long() \
        .clamp(max=PLDDT_BINS - 1)
    conf = cross_entropy(out['plddt'].float().transpose(1, 2), bins,
                         reduction='none')
    terms['plddt'] = (conf * mask).sum() / mask.sum()
    resolved = binary_cross_entropy_with_logits(
        out['experimentally_resolved'].float(), target['resolved'],
        reduction='none')
    atom_mask = target['atom_mask'] * mask[..., None]
    terms['experimentally_resolved'] = (resolved * atom_mask).sum() / \
        atom_mask.sum().clamp_min(1)
    total = sum(WEIGHTS[k] * v for k, v in terms.items())
    return total, terms
