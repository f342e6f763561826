"""The extra MSA stack (supplementary 1.7.2, Alg. 18): the sequences
beyond the MSA clusters, embedded narrow (c_e) and run through Evoformer
blocks whose column attention is global (Alg. 19); only their pair
representation goes on to the Evoformer."""
import math

import torch
from torch import nn

from alphafold2.model import EvoformerBlock, mask_bias

#: Extra MSA features (Table 1): extra_msa one-hot (23), has_deletion,
#: deletion_value.
EXTRA_MSA_FEAT = 25
#: The masked mean's guard (OpenFold's ExtraMSAStackConfig.eps, mlcommons/hpc
#: 2c627d4 openfold/openfold/config.py).
GLOBAL_EPS = 1e-8


class MSAColumnGlobalAttention(nn.Module):
    '''Alg. 19: per column, one query per head (the mean of the
    sequences' queries) against one key and value per sequence shared by
    the heads; a gate per sequence. Padded sequences (*mask* 0) are left
    out of the mean and get no weight (OpenFold's global_attention.py).'''

    def __init__(self, cfg):
        super().__init__()
        h, c = cfg.msa_heads, cfg.c_hidden
        self.heads, self.c = h, c
        self.norm = nn.LayerNorm(cfg.c_m)
        self.q = nn.Linear(cfg.c_m, h * c, bias=False)
        self.k = nn.Linear(cfg.c_m, c, bias=False)
        self.v = nn.Linear(cfg.c_m, c, bias=False)
        self.gate = nn.Linear(cfg.c_m, h * c)
        self.out = nn.Linear(h * c, cfg.c_m)
        nn.init.zeros_(self.gate.weight)
        nn.init.ones_(self.gate.bias)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, e, mask):
        # e: [B, S, R, c_e], mask [B, S, R]; attention over S per column.
        e = self.norm(e)
        weight = mask[..., None].to(e.dtype)
        q = (self.q(e) * weight).sum(1) / (weight.sum(1) + GLOBAL_EPS)
        q = q.unflatten(-1, (self.heads, self.c))                  # B,R,h,c
        k, v = self.k(e), self.v(e)                                # B,S,R,c
        logits = torch.einsum('brhc,bsrc->brhs', q, k) / math.sqrt(self.c)
        logits = logits + mask_bias(mask).transpose(1, 2)[:, :, None, :]
        o = torch.einsum('brhs,bsrc->brhc', logits.softmax(-1).to(v.dtype),
                         v)
        gate = torch.sigmoid(self.gate(e)).unflatten(-1, (self.heads,
                                                          self.c))
        return self.out((gate * o[:, None]).flatten(-2))


class ExtraMSABlock(EvoformerBlock):
    '''Alg. 18's loop body: an Evoformer block (Alg. 6) with global column
    attention.'''

    def __init__(self, cfg):
        super().__init__(cfg)
        self.column_attention = MSAColumnGlobalAttention(cfg)


class ExtraMSAStack(nn.Module):
    '''Alg. 2 line 14 and Alg. 18: embed the extra MSA (a linear to c_e),
    run the blocks, return the updated pair representation.'''

    def __init__(self, cfg, checkpoint_blocks=False):
        super().__init__()
        self.embed = nn.Linear(EXTRA_MSA_FEAT, cfg.c_e)
        self.blocks = nn.ModuleList(ExtraMSABlock(cfg.extra_msa())
                                    for _ in range(cfg.extra_blocks))
        self.checkpoint_blocks = checkpoint_blocks

    def forward(self, extra_msa_feat, z, extra_msa_mask, pair_mask):
        from alphafold2.model import run_block
        e = self.embed(extra_msa_feat)
        for block in self.blocks:
            e, z = run_block(block, self.checkpoint_blocks and self.training,
                             e, z, extra_msa_mask, pair_mask)
        return z
