"""The whole AlphaFold2 model (supplementary Alg. 2), as OpenFold's
initial training builds it: input and recycling embedders, templates,
the extra MSA stack, 48 Evoformer blocks, the single representation, the
structure module and the heads, the network run 1 + recycles times with
gradients through the last run only (1.10)."""
import torch
from torch import nn

from alphafold2.extra_msa import ExtraMSAStack
from alphafold2.geometry import Frames, pseudo_beta
from alphafold2.heads import Heads
from alphafold2.model import EvoformerBlock, InputEmbedder, run_block
from alphafold2.structure import StructureModule
from alphafold2.templates import TemplateEmbedder

#: Recycled distances: 15 bins, 3.375 to 21.375 Angstrom (Alg. 32).
RECYCLE_BINS = 15
RECYCLE_RANGE = (3.375, 21.375)
#: The template angle features' psi mask (Table 1's last 7 channels are
#: the torsion mask, psi third): the template rows' MSA mask.
PSI_MASK_CHANNEL = -7 + 2


def full_precision(device):
    '''Autocast off on *device* (where autocast exists).'''
    import contextlib
    if device.type in ('cuda', 'cpu'):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


class RecyclingEmbedder(nn.Module):
    '''Alg. 32: the previous run's first MSA row and pair representation
    (layer-normed) and its pseudo-beta distances (one-hot, linear to
    c_z).'''

    def __init__(self, cfg):
        super().__init__()
        self.norm_m = nn.LayerNorm(cfg.c_m)
        self.norm_z = nn.LayerNorm(cfg.c_z)
        self.distance = nn.Linear(RECYCLE_BINS, cfg.c_z)

    def forward(self, m1, z, x):
        low, high = RECYCLE_RANGE
        edges = torch.linspace(low, high, RECYCLE_BINS - 1, device=x.device)
        bins = torch.bucketize(torch.cdist(x, x).detach(), edges)
        one_hot = nn.functional.one_hot(bins, RECYCLE_BINS).to(z.dtype)
        return self.norm_m(m1), self.norm_z(z) + self.distance(one_hot)


class AlphaFold2(nn.Module):
    '''Alg. 2. ``forward(target_feat, residue_index, msa_feat,
    extra_msa_feat, template_pair_feat, template_angle_feat, seq_mask,
    msa_mask, extra_msa_mask, template_mask, recycles)`` returns the
    heads' logits and the structure module's outputs.

    The masks are OpenFold's (1 real, 0 padding): *seq_mask* [B, R],
    *msa_mask* [B, S, R], *extra_msa_mask* [B, E, R], *template_mask*
    [B, T]; the pair mask is seq_mask's outer product, and the template
    rows' MSA mask their psi-angle mask, as OpenFold builds them
    (mlcommons/hpc 2c627d4 openfold/openfold/model/alphafold.py). Padded
    residues and sequences get no weight in any attention, triangle
    multiplication or outer product mean, so the outputs at real
    residues do not depend on the padding.

    *recycles*: the number of extra runs; None: in training drawn
    uniformly from 0 to :attr:`max_recycles` with a generator seeded alike
    on every rank (1.11.2), in evaluation :attr:`max_recycles` (MLPerf HPC
    evaluates with 3).'''

    def __init__(self, cfg, checkpoint_blocks=False, max_recycles=3,
                 seed=0):
        super().__init__()
        self.cfg = cfg
        self.embed = InputEmbedder(cfg)
        self.recycle = RecyclingEmbedder(cfg)
        self.templates = TemplateEmbedder(cfg, checkpoint_blocks)
        self.extra_msa = ExtraMSAStack(cfg, checkpoint_blocks)
        self.blocks = nn.ModuleList(EvoformerBlock(cfg)
                                    for _ in range(cfg.blocks))
        self.single = nn.Linear(cfg.c_m, cfg.c_s)
        self.structure = StructureModule(cfg)
        self.heads = Heads(cfg)
        #: Recompute each Evoformer, extra-MSA and template block in the
        #: backward pass (OpenFold does, to fit crop 256 in memory): 4/3
        #: the FLOPs of the trained run.
        self.checkpoint_blocks = checkpoint_blocks
        self.max_recycles = max_recycles
        self.recycle_generator = torch.Generator().manual_seed(seed)

    def iteration(self, features, previous):
        target_feat, residue_index, msa_feat, extra_msa_feat, \
            template_pair_feat, template_angle_feat, seq_mask, msa_mask, \
            extra_msa_mask, template_mask = features
        pair_mask = seq_mask[:, :, None] * seq_mask[:, None, :]
        recompute = self.checkpoint_blocks and self.training
        m, z = self.embed(target_feat, residue_index, msa_feat)
        clusters = m.shape[1]
        if previous is None:           # the first run recycles zeros
            residues = z.shape[1]
            previous = (m.new_zeros(m[:, 0].shape), z.new_zeros(z.shape),
                        z.new_zeros(z.shape[0], residues, 3))
        m1, z_update = self.recycle(*previous)
        m = torch.cat([m[:, :1] + m1[:, None], m[:, 1:]], 1)
        z = z + z_update
        template_rows, z_update = self.templates(
            template_pair_feat, template_angle_feat, z, pair_mask,
            template_mask)
        z = z + z_update
        m = torch.cat([m, template_rows], 1)
        # OpenFold's padded features have a zero torsion mask; ours may
        # not (padding filled with anything), so seq_mask is applied too.
        msa_mask = torch.cat([msa_mask, template_angle_feat[
            ..., PSI_MASK_CHANNEL] * seq_mask[:, None]], 1)
        z = self.extra_msa(extra_msa_feat, z, extra_msa_mask, pair_mask)
        for block in self.blocks:
            m, z = run_block(block, recompute, m, z, msa_mask, pair_mask)
        s = self.single(m[:, 0])
        # Frames in fp32 under mixed precision: eight composed updates
        # and point distances lose too much in bf16.
        with full_precision(s.device):
            structure = self.structure(s.float(), z.float(),
                                       seq_mask.float())
        out = self.heads(m[:, :clusters], z, structure['single'])
        out['frames'], out['angles'] = structure['frames'], \
            structure['angles']
        final = structure['frames']
        aatype = target_feat[..., :21].argmax(-1)
        x = pseudo_beta(Frames(final.rotations[-1], final.translations[-1]),
                        aatype)
        return out, (m[:, 0], z, x)

    def forward(self, target_feat, residue_index, msa_feat, extra_msa_feat,
                template_pair_feat, template_angle_feat, seq_mask, msa_mask,
                extra_msa_mask, template_mask, recycles=None):
        features = (target_feat, residue_index, msa_feat, extra_msa_feat,
                    template_pair_feat, template_angle_feat, seq_mask,
                    msa_mask, extra_msa_mask, template_mask)
        if recycles is None:
            recycles = self.max_recycles if not self.training else int(
                torch.randint(self.max_recycles + 1, (),
                              generator=self.recycle_generator))
        previous = None
        for _ in range(recycles):
            with torch.no_grad():
                _, previous = self.iteration(features, previous)
            previous = tuple(t.detach() for t in previous)
        out, _ = self.iteration(features, previous)
        out['recycles'] = recycles
        return out
