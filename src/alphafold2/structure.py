"""The structure module (supplementary 1.8, Alg. 20): invariant point
attention (Alg. 22), the backbone update (Alg. 23) and the torsion-angle
ResNet, eight layers that share their weights, frames in Angstrom."""
import math

import torch
from torch import nn
from torch.nn.functional import softplus

from alphafold2.geometry import Frames, quaternion_update
from alphafold2.model import mask_bias

#: Torsion angles per residue (1.8.1): omega, phi, psi, chi1-4.
TORSIONS = 7
#: The structure module works in nanometres; frames' translations are
#: multiplied by 10 for Angstrom (Alg. 20 line 16 and 1.8.2).
POSITION_SCALE = 10.0


class InvariantPointAttention(nn.Module):
    '''Alg. 22: attention between residues on scalar queries and keys, a
    pair bias and the distance between query and key points placed in
    each residue's frame; values are scalars, the pair representation
    and points brought back to the query's frame, so the output does not
    change under a global rotation and translation of the frames.'''

    def __init__(self, cfg):
        super().__init__()
        h, c = cfg.ipa_heads, cfg.c_ipa
        pq, pv = cfg.qk_points, cfg.v_points
        self.heads, self.c, self.pq, self.pv = h, c, pq, pv
        self.q = nn.Linear(cfg.c_s, h * c)
        self.kv = nn.Linear(cfg.c_s, 2 * h * c)
        self.q_points = nn.Linear(cfg.c_s, h * pq * 3)
        self.kv_points = nn.Linear(cfg.c_s, h * (pq + pv) * 3)
        self.bias = nn.Linear(cfg.c_z, h)
        #: gamma^h before the softplus: ln(e - 1), so softplus gives 1.
        self.head_weights = nn.Parameter(torch.full(
            (h,), math.log(math.e - 1)))
        self.out = nn.Linear(h * (cfg.c_z + c + 4 * pv), cfg.c_s)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, s, z, frames, mask):
        # s: [B, R, c_s], z: [B, R, R, c_z]; frames batch [B, R]; mask
        # [B, R]: padded residues get no weight (OpenFold's square_mask).
        h, c, pq, pv = self.heads, self.c, self.pq, self.pv
        q = self.q(s).unflatten(-1, (h, c))
        k, v = self.kv(s).unflatten(-1, (h, 2 * c)).split(c, -1)
        local = frames.unsqueeze(-1)                    # one frame, h * p pts
        q_pts = local.apply(self.q_points(s).unflatten(-1, (h * pq, 3)))
        kv_pts = local.apply(self.kv_points(s).unflatten(
            -1, (h * (pq + pv), 3))).unflatten(-2, (h, pq + pv))
        q_pts = q_pts.unflatten(-2, (h, pq))             # [B, R, h, pq, 3]
        k_pts, v_pts = kv_pts.split((pq, pv), -2)
        w_c = math.sqrt(2 / (9 * pq))
        w_l = math.sqrt(1 / 3)
        gamma = softplus(self.head_weights)
        distance = ((q_pts[:, :, None] - k_pts[:, None]) ** 2).sum((-1, -2))
        logits = w_l * (torch.einsum('bihc,bjhc->bijh', q, k) / math.sqrt(c)
                        + self.bias(z) - gamma * w_c / 2 * distance)
        logits = logits + mask_bias(mask[:, None, :, None] *
                                    mask[:, :, None, None])
        a = logits.softmax(2)                            # over j
        o = torch.einsum('bijh,bjhc->bihc', a, v)
        o_pts = torch.einsum('bijh,bjhpx->bihpx', a, v_pts)
        o_pts = frames.unsqueeze(-1).unsqueeze(-1).invert_apply(o_pts)
        o_pair = torch.einsum('bijh,bijc->bihc', a, z)
        norms = torch.sqrt((o_pts ** 2).sum(-1) + 1e-8)
        return self.out(torch.cat([o.flatten(-2), o_pts.flatten(-3),
                                   norms.flatten(-2), o_pair.flatten(-2)],
                                  -1))


class StructureTransition(nn.Module):
    '''Alg. 20 lines 8-9: three linears with ReLUs, residual, dropout 0.1
    and a layer norm.'''

    def __init__(self, c_s):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(c_s, c_s), nn.ReLU(),
                                 nn.Linear(c_s, c_s), nn.ReLU(),
                                 nn.Linear(c_s, c_s))
        self.norm = nn.LayerNorm(c_s)

    def forward(self, s):
        s = s + self.net(s)
        return self.norm(nn.functional.dropout(s, 0.1, self.training))


class AngleResnet(nn.Module):
    '''Alg. 20 lines 11-14: torsion angles (unnormalised cos, sin) from the
    single representation and its initial value, two residual blocks.'''

    def __init__(self, cfg):
        super().__init__()
        c = cfg.c_resnet
        self.linear_in = nn.Linear(cfg.c_s, c)
        self.linear_initial = nn.Linear(cfg.c_s, c)
        self.blocks = nn.ModuleList(nn.Sequential(
            nn.ReLU(), nn.Linear(c, c), nn.ReLU(), nn.Linear(c, c))
            for _ in range(cfg.resnet_blocks))
        self.out = nn.Linear(c, 2 * TORSIONS)

    def forward(self, s, s_initial):
        relu = torch.relu
        a = self.linear_in(relu(s)) + self.linear_initial(relu(s_initial))
        for block in self.blocks:
            a = a + block(a)
        return self.out(relu(a)).unflatten(-1, (TORSIONS, 2))


class StructureModule(nn.Module):
    '''Alg. 20: from black-hole initialisation (every frame the identity)
    to a backbone frame per residue; every layer's frames and angles are
    returned for the auxiliary loss.'''

    def __init__(self, cfg):
        super().__init__()
        self.layers = cfg.structure_layers
        self.norm_s = nn.LayerNorm(cfg.c_s)
        self.norm_z = nn.LayerNorm(cfg.c_z)
        self.linear_in = nn.Linear(cfg.c_s, cfg.c_s)
        self.ipa = InvariantPointAttention(cfg)
        self.norm_ipa = nn.LayerNorm(cfg.c_s)
        self.transition = StructureTransition(cfg.c_s)
        self.backbone_update = nn.Linear(cfg.c_s, 6)
        nn.init.zeros_(self.backbone_update.weight)
        nn.init.zeros_(self.backbone_update.bias)
        self.angles = AngleResnet(cfg)

    def forward(self, s, z, mask):
        '''*mask* [B, R]: the sequence mask. {'frames': per-layer Frames stacked on a leading axis (Angstrom),
        'angles': [L, B, R, 7, 2] unnormalised, 'single': final s}.'''
        s_initial = self.norm_s(s)
        z = self.norm_z(z)
        s = self.linear_in(s_initial)
        frames = Frames.identity(s.shape[:-1], s.device, s.dtype)
        rotations, translations, angles = [], [], []
        for layer in range(self.layers):
            s = s + self.ipa(s, z, frames, mask)
            s = self.norm_ipa(nn.functional.dropout(s, 0.1, self.training))
            s = self.transition(s)
            frames = frames.compose(quaternion_update(
                self.backbone_update(s)))
            angles.append(self.angles(s, s_initial))
            scaled = frames.scale_translation(POSITION_SCALE)
            rotations.append(scaled.rotations)
            translations.append(scaled.translations)
            if layer < self.layers - 1:
                frames = frames.stop_rotation_gradient()
        return {'frames': Frames(torch.stack(rotations),
                                 torch.stack(translations)),
                'angles': torch.stack(angles), 'single': s}
