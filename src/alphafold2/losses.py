"""AlphaFold2's initial-training loss as MLPerf HPC's OpenFold reference
computes it (mlcommons/hpc 2c627d4 ``openfold/openfold/loss.py``,
``AlphaFoldLoss``, weights from ``openfold/openfold/config.py``) and
lDDT-Ca, its quality metric. Per crop:

    L = sqrt(N) (0.5 L_bb + 0.5 L_final + 0.5 L_torsion + 0.01 L_norm
                 + 0.3 L_dist + 2.0 L_msa + 0.01 L_plddt)

N the crop's residues (OpenFold: sqrt(min(seq_length, crop_size))), then
the mean over the batch. L_bb is OpenFold's backbone FAPE (every
structure-module layer); OpenFold's side-chain FAPE (0.5, the final
layer's all-atom FAPE) has no side chains to work on here, and in its
place L_final is the final layer's backbone FAPE (the paper's L_FAPE on
the backbone). OpenFold's supervised_chi (1.0 x (0.5 chi + 0.01 angle
norm)) has no chi angles here: L_torsion is Alg. 27 on the backbone
torsions (omega, phi, psi) at 0.5, L_norm its angle-norm penalty at 0.01.
The experimentally-resolved loss is computed at weight 0 and the
violation loss left out: both weigh 0 in OpenFold's initial training
(1.0 and 0.01 in fine-tuning only, ``_finetuning_stage``)."""
import torch
from torch.nn.functional import binary_cross_entropy_with_logits, \
    cross_entropy

from alphafold2.heads import PLDDT_BINS

#: The terms' weights (OpenFold's initial-training config, see above).
WEIGHTS = {'backbone_fape': 0.5, 'final_backbone_fape': 0.5,
           'backbone_torsion': 0.5, 'angle_norm': 0.01, 'distogram': 0.3,
           'masked_msa': 2.0, 'plddt': 0.01, 'experimentally_resolved': 0.0}
#: The angle norm: sqrt(|a|^2 + 1e-8) (OpenFold's supervised_chi eps).
ANGLE_NORM_EPS = 1e-8
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


def masked_mean(x, mask, dims):
    '''The mean of *x* over *dims* where *mask* (broadcast to it) is 1.'''
    mask = mask.expand_as(x)
    return (x * mask).sum(dims) / mask.sum(dims).clamp_min(1)


def torsion_loss(angles, true, mask):
    '''Alg. 27's angle term on the torsions *mask* [B, R, 7] marks: the
    squared distance of the normalised (cos, sin) to the truth, averaged
    over layers, residues and angles, per crop [B]. *angles*
    [layers, B, R, 7, 2] unnormalised.'''
    norm = angles.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    squared = ((angles / norm - true) ** 2).sum(-1)      # [L, B, R, 7]
    return masked_mean(squared.movedim(0, -1), mask[..., None],
                       (-1, -2, -3))


def angle_norm_loss(angles, seq_mask):
    '''Alg. 27's angle-norm penalty: |sqrt(|a|^2 + eps) - 1| averaged
    over layers, the crop's residues (*seq_mask* [B, R]) and all seven
    angles, per crop [B] (OpenFold's supervised_chi_loss).'''
    norm = torch.sqrt((angles.float() ** 2).sum(-1) + ANGLE_NORM_EPS)
    error = (norm - 1).abs().movedim(0, -1)              # [B, R, 7, L]
    return masked_mean(error, seq_mask[..., None, None], (-1, -2, -3))


def crop_scale(seq_mask):
    '''sqrt of each crop's residues [B]: OpenFold's loss scale
    sqrt(min(seq_length, crop_size)) ("to decrease the relative
    importance of short sequences", supplementary 1.9); padding is what a
    shorter chain leaves of the crop.'''
    return seq_mask.sum(-1).sqrt()


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
    '''(loss, {name: value}): the scaled, weighted total averaged over
    the batch, OpenFold's ``scaled_weighted_total_loss``, from the model's
    outputs *out* and a batch's *target* (a dict: ``frames`` the true
    backbone Frames [B, R], ``ca``, ``torsions``, ``torsion_mask``,
    ``distogram``, ``msa``, ``msa_mask``, ``resolved``, ``atom_mask``,
    ``residue_mask`` (resolved backbone), ``seq_mask`` (the crop's
    residues)); the terms, unweighted, are batch means. *clamp*: FAPE
    clamped at 10 A (AlphaFold2 clamps 90% of its batches).'''
    terms = per_crop_terms(out, target, clamp)
    weighted = sum(WEIGHTS[k] * v for k, v in terms.items())    # [B]
    total = (crop_scale(target['seq_mask']) * weighted).mean()
    return total, {k: v.mean() for k, v in terms.items()}


def per_crop_terms(out, target, clamp):
    '''{name: [B]}: each term of :data:`WEIGHTS`, per crop.'''
    mask = target['residue_mask']
    frames = out['frames']                      # [layers, B, R]
    true_frames, true_ca = target['frames'], target['ca']
    per_layer = fape(frames, true_frames, frames.translations, true_ca,
                     mask, FAPE_CLAMP if clamp else None)  # [layers, B]
    terms = {'backbone_fape': per_layer.mean(0),
             'final_backbone_fape': per_layer[-1],
             'backbone_torsion': torsion_loss(
                 out['angles'].float(), target['torsions'],
                 target['torsion_mask'] * mask[..., None]),
             'angle_norm': angle_norm_loss(out['angles'],
                                           target['seq_mask'])}
    pair_mask = mask[..., :, None] * mask[..., None, :]
    dist = cross_entropy(out['distogram'].float().permute(0, 3, 1, 2),
                         target['distogram'], reduction='none')
    terms['distogram'] = masked_mean(dist, pair_mask, (-1, -2))
    msa = cross_entropy(out['masked_msa'].float().permute(0, 3, 1, 2),
                        target['msa'], reduction='none')
    terms['masked_msa'] = masked_mean(msa, target['msa_mask'], (-1, -2))
    # pLDDT's target: each residue's lDDT-Ca in the final structure,
    # no gradient into the structure (1.9.6).
    ca = frames.translations[-1].detach().float()
    bins = (lddt(ca, true_ca, mask, per_residue=True) * PLDDT_BINS).long() \
        .clamp(max=PLDDT_BINS - 1)
    conf = cross_entropy(out['plddt'].float().transpose(1, 2), bins,
                         reduction='none')
    terms['plddt'] = masked_mean(conf, mask, (-1,))
    resolved = binary_cross_entropy_with_logits(
        out['experimentally_resolved'].float(), target['resolved'],
        reduction='none')
    atom_mask = target['atom_mask'] * mask[..., None]
    terms['experimentally_resolved'] = masked_mean(resolved, atom_mask,
                                                   (-1, -2))
    return terms
