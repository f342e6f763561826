"""AlphaFold2's trunk: input embedding and the Evoformer's blocks, the
parts the extra-MSA and template stacks reuse, and the model's sizes,
written from the AlphaFold2 supplementary information (Jumper et al.
2021, Nature 596:583, "Supplementary Methods"); the algorithm numbers
below are that document's. OpenFold (aqlaboratory/openfold, the MLPerf
HPC model) implements the same algorithms; this package follows the
paper, not OpenFold's code, and matches OpenFold's parameter count.

The whole model (Alg. 2) is :mod:`alphafold2.alphafold`: templates
(:mod:`~alphafold2.templates`), the extra MSA stack
(:mod:`~alphafold2.extra_msa`), the structure module
(:mod:`~alphafold2.structure`), the heads (:mod:`~alphafold2.heads`) and
recycling; losses in :mod:`~alphafold2.losses`.
"""
import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

#: Channels of the input features (supplementary Table 1): target_feat is the
#: one-hot amino acid (20 + unknown + the 'between segments' flag); msa_feat
#: is cluster_msa one-hot (23), has_deletion, deletion_value,
#: cluster_profile (23) and cluster_deletion_mean.
TARGET_FEAT = 22
MSA_FEAT = 49
#: Relative positions are clipped to +-32 (Alg. 4).
MAX_RELATIVE = 32
#: Distogram: 64 bins, 2.3125 to 21.6875 Angstrom (section 1.9.8).
DISTOGRAM_BINS = 64
DISTOGRAM_RANGE = (2.3125, 21.6875)
#: The attention logits' bias where a key is masked out: -INF (OpenFold's
#: ``(mask - 1) * inf``, inf 1e9 for the Evoformer and extra-MSA stacks:
#: mlcommons/hpc 2c627d4 openfold/openfold/config.py, model/attention.py).
INF = 1e9
#: The outer product mean divides by the number of sequences both
#: residues have, plus 1e-3 (OpenFold's eps_opm, the same config.py).
OPM_EPS = 1e-3


def mask_bias(mask):
    '''The additive attention bias of a 0/1 *mask* of keys: 0 where a key
    is present, -INF where it is padding, so that a padded residue or
    sequence gets no weight. Kept in float32 whatever the logits' type
    (-1e9 does not fit fp16).'''
    return (mask.float() - 1) * INF


class Config:
    '''Model sizes; defaults are AlphaFold2's (supplementary 1.5-1.8),
    as OpenFold's ``initial_training`` configuration sets them.

    Evoformer (1.6): c_m, c_z, blocks, msa_heads, pair_heads, c_hidden
    (MSA attention), c_hidden_pair (triangle attention; default c_hidden),
    c_opm, c_tri_mul, transition. Single representation c_s. Extra MSA
    stack (1.7.2): c_e, extra_blocks, c_hidden_extra. Templates (1.7.1):
    c_t, template_blocks, c_hidden_template and template_heads (the pair
    stack's triangle attention and the pointwise attention). Structure
    module (1.8): ipa_heads, c_ipa, qk_points, v_points, structure_layers,
    c_resnet, resnet_blocks. pLDDT head (1.9.6): c_plddt.'''

    def __init__(self, c_m=256, c_z=128, blocks=48, msa_heads=8,
                 pair_heads=4, c_hidden=32, c_opm=32, c_tri_mul=128,
                 transition=4, c_hidden_pair=None, c_s=384, c_e=64,
                 extra_blocks=4, c_hidden_extra=8, c_t=64, template_blocks=2,
                 c_hidden_template=16, template_heads=4, ipa_heads=12,
                 c_ipa=16, qk_points=4, v_points=8, structure_layers=8,
                 c_resnet=128, resnet_blocks=2, c_plddt=128):
        self.c_m, self.c_z, self.blocks = c_m, c_z, blocks
        self.msa_heads, self.pair_heads = msa_heads, pair_heads
        self.c_hidden, self.c_opm, self.c_tri_mul = c_hidden, c_opm, c_tri_mul
        self.c_hidden_pair = c_hidden if c_hidden_pair is None \
            else c_hidden_pair
        self.transition = transition
        self.c_s, self.c_e, self.extra_blocks = c_s, c_e, extra_blocks
        self.c_hidden_extra = c_hidden_extra
        self.c_t, self.template_blocks = c_t, template_blocks
        self.c_hidden_template = c_hidden_template
        self.template_heads = template_heads
        self.ipa_heads, self.c_ipa = ipa_heads, c_ipa
        self.qk_points, self.v_points = qk_points, v_points
        self.structure_layers = structure_layers
        self.c_resnet, self.resnet_blocks = c_resnet, resnet_blocks
        self.c_plddt = c_plddt

    def extra_msa(self):
        '''The extra MSA stack's blocks: Evoformer blocks on c_e with
        narrower MSA attention (supplementary 1.7.2).'''
        return self.replace(c_m=self.c_e, c_hidden=self.c_hidden_extra,
                            c_hidden_pair=self.c_hidden_pair)

    def template_pair(self):
        '''The template pair stack's blocks (Alg. 16) on c_t: triangle
        updates c_t wide, transition 2x (supplementary 1.7.1).'''
        return self.replace(c_z=self.c_t, pair_heads=self.template_heads,
                            c_hidden_pair=self.c_hidden_template,
                            c_tri_mul=self.c_t, transition=2)

    def replace(self, **changes):
        copy = Config.__new__(Config)
        copy.__dict__.update(self.__dict__, **changes)
        return copy


def dropout(x, p, shared_dim, training):
    '''Dropout whose mask is shared along *shared_dim* (the paper's
    "DropoutRowwise"/"DropoutColumnwise", supplementary 1.11.6).'''
    if not training or p == 0:
        return x
    shape = list(x.shape)
    shape[shared_dim] = 1
    keep = torch.empty(shape, device=x.device, dtype=x.dtype).bernoulli_(1 - p)
    return x * keep / (1 - p)


class GatedAttention(nn.Module):
    '''Multi-head self-attention along the second-last axis, an optional
    additive bias on the logits and a sigmoid gate on the output: the core
    that Alg. 7, 8, 13 and 14 share.'''

    def __init__(self, c_in, c_hidden, heads):
        super().__init__()
        self.heads, self.c_hidden = heads, c_hidden
        self.qkv = nn.Linear(c_in, 3 * heads * c_hidden, bias=False)
        self.gate = nn.Linear(c_in, heads * c_hidden)
        self.out = nn.Linear(heads * c_hidden, c_in)
        # Gates start open and the output at zero (supplementary 1.11.4).
        nn.init.zeros_(self.gate.weight)
        nn.init.ones_(self.gate.bias)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, x, bias=None, mask=None):
        # x: [..., L, c_in]; attention runs over L for every leading index.
        # mask: 0/1 over the keys, broadcastable to [..., h, L, L].
        *lead, length, _ = x.shape
        q, k, v = self.qkv(x).view(*lead, length, 3, self.heads,
                                   self.c_hidden).unbind(-3)
        q, k, v = (t.transpose(-2, -3) for t in (q, k, v))  # [..., h, L, c]
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.c_hidden)
        if bias is not None:
            logits = logits + bias
        if mask is not None:
            logits = logits + mask_bias(mask)
        o = (logits.softmax(-1).to(v.dtype) @ v).transpose(-2, -3).reshape(
            *lead, length, self.heads * self.c_hidden)
        return self.out(torch.sigmoid(self.gate(x)) * o)


class MSARowAttentionWithPairBias(nn.Module):
    '''Alg. 7: attention along residues within each MSA row, biased by the
    pair representation.'''

    def __init__(self, cfg):
        super().__init__()
        self.norm_m = nn.LayerNorm(cfg.c_m)
        self.norm_z = nn.LayerNorm(cfg.c_z)
        self.bias = nn.Linear(cfg.c_z, cfg.msa_heads, bias=False)
        self.attention = GatedAttention(cfg.c_m, cfg.c_hidden, cfg.msa_heads)

    def forward(self, m, z, msa_mask):
        # m: [B, S, R, c_m], z: [B, R, R, c_z] -> bias [B, 1, h, R, R];
        # msa_mask [B, S, R]: keys are the row's residues.
        bias = self.bias(self.norm_z(z)).permute(0, 3, 1, 2).unsqueeze(1)
        return self.attention(self.norm_m(m), bias,
                              msa_mask[:, :, None, None, :])


class MSAColumnAttention(nn.Module):
    '''Alg. 8: attention along sequences within each MSA column.'''

    def __init__(self, cfg):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.c_m)
        self.attention = GatedAttention(cfg.c_m, cfg.c_hidden, cfg.msa_heads)

    def forward(self, m, msa_mask):
        m = self.norm(m).transpose(-2, -3)          # [B, R, S, c_m]
        # Keys are the column's sequences: mask [B, R, 1, 1, S].
        mask = msa_mask.transpose(-1, -2)[:, :, None, None, :]
        return self.attention(m, mask=mask).transpose(-2, -3)


class Transition(nn.Module):
    '''Alg. 9 (MSA) and Alg. 15 (pair): a two-layer MLP, n times wider.'''

    def __init__(self, c, n):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(c), nn.Linear(c, n * c),
                                 nn.ReLU(), nn.Linear(n * c, c))

    def forward(self, x):
        return self.net(x)


class OuterProductMean(nn.Module):
    '''Alg. 10: the MSA's update to the pair representation: the outer
    products summed over the sequences both residues have, through the
    output linear, divided by their number (+ 1e-3), as OpenFold does
    (mlcommons/hpc 2c627d4 openfold/openfold/model/outer_product_mean.py).
    '''

    def __init__(self, cfg):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.c_m)
        self.a = nn.Linear(cfg.c_m, cfg.c_opm)
        self.b = nn.Linear(cfg.c_m, cfg.c_opm)
        self.out = nn.Linear(cfg.c_opm * cfg.c_opm, cfg.c_z)

    def forward(self, m, msa_mask):
        m = self.norm(m)
        mask = msa_mask[..., None].to(m.dtype)       # [B, S, R, 1]
        a, b = self.a(m) * mask, self.b(m) * mask    # [B, S, R, c]
        outer = torch.einsum('bsic,bsjd->bijcd', a, b)
        count = torch.einsum('bsi,bsj->bij', msa_mask.float(),
                             msa_mask.float())[..., None]
        return self.out(outer.flatten(-2)) / (count + OPM_EPS)


class TriangleMultiplication(nn.Module):
    '''Alg. 11 (``outgoing``: edge ij from ik and jk) and Alg. 12
    (``incoming``: from ki and kj).'''

    def __init__(self, cfg, outgoing):
        super().__init__()
        c, c_z = cfg.c_tri_mul, cfg.c_z
        self.outgoing = outgoing
        self.norm_in = nn.LayerNorm(c_z)
        self.projections = nn.Linear(c_z, 4 * c)     # a, a-gate, b, b-gate
        self.gate = nn.Linear(c_z, c_z)
        self.norm_out = nn.LayerNorm(c)
        self.out = nn.Linear(c, c_z)

    def forward(self, z, pair_mask):
        # Edges to padded residues do not enter the sum over k.
        z = self.norm_in(z)
        a, a_gate, b, b_gate = self.projections(z).chunk(4, -1)
        mask = pair_mask[..., None].to(z.dtype)
        a = a * torch.sigmoid(a_gate) * mask
        b = b * torch.sigmoid(b_gate) * mask
        if self.outgoing:
            update = torch.einsum('bikc,bjkc->bijc', a, b)
        else:
            update = torch.einsum('bkic,bkjc->bijc', a, b)
        return torch.sigmoid(self.gate(z)) * self.out(self.norm_out(update))


class TriangleAttention(nn.Module):
    '''Alg. 13 (around the starting node: edge ij attends to ik, biased by
    jk) and Alg. 14 (around the ending node, the same on the transpose).'''

    def __init__(self, cfg, starting):
        super().__init__()
        self.starting = starting
        self.norm = nn.LayerNorm(cfg.c_z)
        self.bias = nn.Linear(cfg.c_z, cfg.pair_heads, bias=False)
        self.attention = GatedAttention(cfg.c_z, cfg.c_hidden_pair,
                                        cfg.pair_heads)

    def forward(self, z, pair_mask):
        if not self.starting:
            z = z.transpose(-2, -3)
            pair_mask = pair_mask.transpose(-1, -2)
        z = self.norm(z)
        bias = self.bias(z).permute(0, 3, 1, 2).unsqueeze(1)  # [B,1,h,R,R]
        # Edge ij attends to ik: keys k masked per row i, [B, R, 1, 1, R].
        out = self.attention(z, bias, pair_mask[:, :, None, None, :])
        return out if self.starting else out.transpose(-2, -3)


class EvoformerBlock(nn.Module):
    '''Alg. 6, one block, with the paper's dropout rates (1.11.6).'''

    def __init__(self, cfg):
        super().__init__()
        self.row_attention = MSARowAttentionWithPairBias(cfg)
        self.column_attention = MSAColumnAttention(cfg)
        self.msa_transition = Transition(cfg.c_m, cfg.transition)
        self.outer_product_mean = OuterProductMean(cfg)
        self.tri_mul_out = TriangleMultiplication(cfg, outgoing=True)
        self.tri_mul_in = TriangleMultiplication(cfg, outgoing=False)
        self.tri_att_start = TriangleAttention(cfg, starting=True)
        self.tri_att_end = TriangleAttention(cfg, starting=False)
        self.pair_transition = Transition(cfg.c_z, cfg.transition)

    def forward(self, m, z, msa_mask, pair_mask):
        '''*msa_mask* [B, S, R] and *pair_mask* [B, R, R]: 1 for real
        sequences and residues, 0 for padding (OpenFold's msa_mask and
        seq_mask's outer product).'''
        t = self.training
        # Row-wise dropout shares the mask along rows of the MSA (dim -3)
        # and of the pair (dim -3); column-wise along dim -2.
        m = m + dropout(self.row_attention(m, z, msa_mask), 0.15, -3, t)
        m = m + self.column_attention(m, msa_mask)
        m = m + self.msa_transition(m)
        z = z + self.outer_product_mean(m, msa_mask)
        z = z + dropout(self.tri_mul_out(z, pair_mask), 0.25, -3, t)
        z = z + dropout(self.tri_mul_in(z, pair_mask), 0.25, -3, t)
        z = z + dropout(self.tri_att_start(z, pair_mask), 0.25, -3, t)
        z = z + dropout(self.tri_att_end(z, pair_mask), 0.25, -2, t)
        z = z + self.pair_transition(z)
        return m, z


class InputEmbedder(nn.Module):
    '''Alg. 3, with the relative position encoding of Alg. 4.'''

    def __init__(self, cfg):
        super().__init__()
        self.z_i = nn.Linear(TARGET_FEAT, cfg.c_z)
        self.z_j = nn.Linear(TARGET_FEAT, cfg.c_z)
        self.relpos = nn.Linear(2 * MAX_RELATIVE + 1, cfg.c_z)
        self.m_msa = nn.Linear(MSA_FEAT, cfg.c_m)
        self.m_target = nn.Linear(TARGET_FEAT, cfg.c_m)

    def forward(self, target_feat, residue_index, msa_feat):
        z = self.z_i(target_feat)[:, :, None] + self.z_j(target_feat)[:, None]
        offset = residue_index[:, :, None] - residue_index[:, None]
        offset = offset.clamp(-MAX_RELATIVE, MAX_RELATIVE) + MAX_RELATIVE
        z = z + self.relpos(nn.functional.one_hot(
            offset, 2 * MAX_RELATIVE + 1).to(z.dtype))
        m = self.m_msa(msa_feat) + self.m_target(target_feat)[:, None]
        return m, z


def distogram_bins(coords):
    '''The true bin of each residue pair's distance (section 1.9.8: the
    first and last bins also take everything below and above).'''
    low, high = DISTOGRAM_RANGE
    edges = torch.linspace(low, high, DISTOGRAM_BINS - 1,
                           device=coords.device)
    distances = torch.cdist(coords, coords)
    return torch.bucketize(distances, edges)


def run_block(block, recompute, *x):
    '''``block(*x)``, recomputed in the backward pass when *recompute*
    (OpenFold recomputes every block to fit crop 256 in memory).'''
    if recompute:
        return checkpoint(block, *x, use_reentrant=False)
    return block(*x)
