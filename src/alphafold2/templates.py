"""Template embedding (supplementary 1.7.1): each template's pair
features through the template pair stack (Alg. 16), merged into the pair
representation by pointwise attention over templates (Alg. 17); each
template's torsion-angle features become extra MSA rows (Alg. 2 lines
7-8)."""
import math

import torch
from torch import nn

from alphafold2.model import (Transition, TriangleAttention,
                              TriangleMultiplication, dropout, mask_bias)

#: Template pair features (supplementary Table 1): distogram (39 bins),
#: its mask, both residues' amino acid one-hot (2 x 22), the unit vector
#: between their frames (3) and its mask.
TEMPLATE_PAIR_FEAT = 88
#: Template angle features: amino acid one-hot (22), torsion angles as
#: sin/cos (14), their alternatives (14) and mask (7).
TEMPLATE_ANGLE_FEAT = 57
#: The template distogram: 39 bins, 3.25 to 50.75 Angstrom.
TEMPLATE_BINS = 39
TEMPLATE_RANGE = (3.25, 50.75)


class TemplatePairBlock(nn.Module):
    '''Alg. 16, one block: triangle attention around the starting and
    ending node, the outgoing and incoming triangle multiplications and a
    transition on a template's pair features (dropout 0.25).'''

    def __init__(self, cfg):
        super().__init__()
        self.tri_att_start = TriangleAttention(cfg, starting=True)
        self.tri_att_end = TriangleAttention(cfg, starting=False)
        self.tri_mul_out = TriangleMultiplication(cfg, outgoing=True)
        self.tri_mul_in = TriangleMultiplication(cfg, outgoing=False)
        self.transition = Transition(cfg.c_z, cfg.transition)

    def forward(self, t, pair_mask):
        # pair_mask: the sequence's, as OpenFold's template pair stack
        # takes it (mlcommons/hpc 2c627d4 openfold/model/alphafold.py).
        d = self.training
        t = t + dropout(self.tri_att_start(t, pair_mask), 0.25, -3, d)
        t = t + dropout(self.tri_att_end(t, pair_mask), 0.25, -2, d)
        t = t + dropout(self.tri_mul_out(t, pair_mask), 0.25, -3, d)
        t = t + dropout(self.tri_mul_in(t, pair_mask), 0.25, -3, d)
        return t + self.transition(t)


class TemplatePointwiseAttention(nn.Module):
    '''Alg. 17: each pair ij of the pair representation attends over the
    templates' ij entries (no gate); absent templates (*template_mask* 0)
    get no weight.'''

    def __init__(self, cfg):
        super().__init__()
        h, c = cfg.template_heads, cfg.c_hidden_template
        self.heads, self.c = h, c
        self.q = nn.Linear(cfg.c_z, h * c, bias=False)
        self.k = nn.Linear(cfg.c_t, h * c, bias=False)
        self.v = nn.Linear(cfg.c_t, h * c, bias=False)
        self.out = nn.Linear(h * c, cfg.c_z)

    def forward(self, t, z, template_mask):
        # t: [B, T, R, R, c_t], z: [B, R, R, c_z], template_mask [B, T]
        h, c = self.heads, self.c
        q = self.q(z).unflatten(-1, (h, c))                  # [B,R,R,h,c]
        k = self.k(t).unflatten(-1, (h, c))                  # [B,T,R,R,h,c]
        v = self.v(t).unflatten(-1, (h, c))
        logits = torch.einsum('bijhc,btijhc->bijht', q, k) / math.sqrt(c)
        logits = logits + mask_bias(template_mask)[:, None, None, None, :]
        o = torch.einsum('bijht,btijhc->bijhc', logits.softmax(-1).to(
            v.dtype), v)
        return self.out(o.flatten(-2))


class TemplateEmbedder(nn.Module):
    '''Alg. 2 lines 7-13: template angle features to MSA rows (a two-layer
    MLP), template pair features through the template pair stack, a final
    layer norm and the pointwise attention; the pair update is zero when
    a crop has no template (OpenFold, model/alphafold.py).'''

    def __init__(self, cfg, checkpoint_blocks=False):
        super().__init__()
        pair = cfg.template_pair()
        self.angle = nn.Sequential(nn.Linear(TEMPLATE_ANGLE_FEAT, cfg.c_m),
                                   nn.ReLU(), nn.Linear(cfg.c_m, cfg.c_m))
        self.pair = nn.Linear(TEMPLATE_PAIR_FEAT, cfg.c_t)
        self.blocks = nn.ModuleList(TemplatePairBlock(pair)
                                    for _ in range(cfg.template_blocks))
        self.norm = nn.LayerNorm(cfg.c_t)
        self.pointwise = TemplatePointwiseAttention(cfg)
        self.checkpoint_blocks = checkpoint_blocks

    def forward(self, template_pair_feat, template_angle_feat, z,
                pair_mask, template_mask):
        '''(MSA rows [B, T, R, c_m], pair update [B, R, R, c_z]).'''
        from alphafold2.model import run_block
        t = self.pair(template_pair_feat)                # [B, T, R, R, c_t]
        batch, templates = t.shape[:2]
        t = t.flatten(0, 1)                              # templates as batch
        stack_mask = pair_mask.repeat_interleave(templates, 0)
        for block in self.blocks:
            t = run_block(block, self.checkpoint_blocks and self.training, t,
                          stack_mask)
        t = self.norm(t).unflatten(0, (batch, templates))
        update = self.pointwise(t, z, template_mask)
        has_templates = (template_mask.sum(-1) > 0).to(update.dtype)
        return self.angle(template_angle_feat), \
            update * has_templates[:, None, None, None]


def template_pair_features(aatype, ca, mask):
    '''Template pair features (Table 1) of templates with C-alpha
    positions *ca* [B, T, R, 3] and residues *aatype* [B, T, R]: the
    distogram one-hot, its mask and the two residues' one-hot; the unit
    vectors stay zero (AlphaFold2's initial training does not use them).
    *mask* [B, T, R]: residues the template has.'''
    from torch.nn.functional import one_hot
    low, high = TEMPLATE_RANGE
    edges = torch.linspace(low, high, TEMPLATE_BINS - 1, device=ca.device)
    bins = torch.bucketize(torch.cdist(ca, ca), edges)
    pair_mask = (mask[..., :, None] * mask[..., None, :])[..., None]
    dgram = one_hot(bins, TEMPLATE_BINS).float() * pair_mask
    aa = one_hot(aatype, 22).float()
    residues = ca.shape[-2]
    return torch.cat([
        dgram, pair_mask,
        aa[..., None, :, :].expand(*aa.shape[:-2], residues, residues, 22),
        aa[..., :, None, :].expand(*aa.shape[:-2], residues, residues, 22),
        torch.zeros(*pair_mask.shape[:-1], 3), pair_mask], -1)


def template_angle_features(aatype, torsions, torsion_mask):
    '''Template angle features (Table 1): one-hot, the torsions' sin and
    cos, the same as their alternatives (identical for the backbone), the
    torsion mask.'''
    from torch.nn.functional import one_hot
    sin_cos = torsions.flip(-1).flatten(-2) * torsion_mask.repeat_interleave(
        2, -1)
    return torch.cat([one_hot(aatype, 22).float(), sin_cos, sin_cos,
                      torsion_mask], -1)
