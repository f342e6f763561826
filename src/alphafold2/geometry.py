"""Rigid frames (supplementary 1.1): a rotation ``R`` [..., 3, 3] and a
translation ``t`` [..., 3] acting on points as ``x -> R x + t``; built from
three atoms (Alg. 21), composed with the structure module's updates
(Alg. 23), inverted for FAPE (Alg. 28) and IPA's outputs (Alg. 22); and
the backbone torsion angles the structure module predicts (1.8.1)."""
import torch


class Frames:
    '''A batch of rigid transforms T = (R, t).'''

    def __init__(self, rotations, translations):
        self.rotations, self.translations = rotations, translations

    @classmethod
    def identity(cls, shape, device=None, dtype=None):
        rotations = torch.eye(3, device=device, dtype=dtype).expand(
            *shape, 3, 3)
        return cls(rotations, torch.zeros(*shape, 3, device=device,
                                          dtype=dtype))

    def apply(self, points):
        '''T x for points [..., 3] broadcast against the frames.'''
        return (self.rotations @ points[..., None])[..., 0] + \
            self.translations

    def invert_apply(self, points):
        '''T^-1 x = R^T (x - t).'''
        return (self.rotations.transpose(-1, -2) @
                (points - self.translations)[..., None])[..., 0]

    def compose(self, other):
        '''T o T': (R R', R t' + t).'''
        return Frames(self.rotations @ other.rotations, self.apply(
            other.translations))

    def unsqueeze(self, dim):
        '''A new frame axis at *dim*, counted over the frames' batch axes.'''
        dim = dim if dim >= 0 else dim - 1
        return Frames(self.rotations.unsqueeze(dim - 1),
                      self.translations.unsqueeze(dim))

    def stop_rotation_gradient(self):
        '''Alg. 20 line 20: gradients flow through the translations only
        from one structure-module layer to the next.'''
        return Frames(self.rotations.detach(), self.translations)

    def scale_translation(self, factor):
        return Frames(self.rotations, self.translations * factor)


def frames_from_three_points(x1, x2, x3):
    '''Alg. 21 (rigidFrom3Points): a frame with origin *x2* (C-alpha),
    the x axis towards *x3* (C) and *x1* (N) in the xy plane.'''
    v1, v2 = x3 - x2, x1 - x2
    e1 = v1 / v1.norm(dim=-1, keepdim=True)
    u2 = v2 - e1 * (e1 * v2).sum(-1, keepdim=True)
    e2 = u2 / u2.norm(dim=-1, keepdim=True)
    e3 = torch.cross(e1, e2, dim=-1)
    return Frames(torch.stack([e1, e2, e3], -1), x2)


def quaternion_update(update):
    '''Alg. 23 (BackboneUpdate) lines 2-4: six numbers (b, c, d, t) to a
    frame, the rotation from the non-unit quaternion (1, b, c, d).'''
    b, c, d, t = update[..., 0], update[..., 1], update[..., 2], \
        update[..., 3:]
    norm = torch.sqrt(1 + b * b + c * c + d * d)
    a, b, c, d = 1 / norm, b / norm, c / norm, d / norm
    rotations = torch.stack([
        a * a + b * b - c * c - d * d, 2 * (b * c - a * d),
        2 * (b * d + a * c),
        2 * (b * c + a * d), a * a - b * b + c * c - d * d,
        2 * (c * d - a * b),
        2 * (b * d - a * c), 2 * (c * d + a * b),
        a * a - b * b - c * c + d * d], -1).unflatten(-1, (3, 3))
    return Frames(rotations, t)


def dihedral(p0, p1, p2, p3):
    '''(cos, sin) of the dihedral angle p0-p1-p2-p3, [..., 2].'''
    b0, b1, b2 = p1 - p0, p2 - p1, p3 - p2
    n1, n2 = torch.cross(b0, b1, dim=-1), torch.cross(b1, b2, dim=-1)
    m1 = torch.cross(n1, b1 / b1.norm(dim=-1, keepdim=True), dim=-1)
    x, y = (n1 * n2).sum(-1), (m1 * n2).sum(-1)
    r = torch.sqrt(x * x + y * y).clamp_min(1e-8)
    return torch.stack([x / r, y / r], -1)


def backbone_torsions(n, ca, c):
    '''Backbone torsions in AlphaFold2's order (1.8.1: pre-omega, phi,
    psi; then chi1-4, not computed here) as (cos, sin) [..., R, 7, 2] and
    a mask [..., R, 7] that is 0 where an angle is undefined (the chain's
    ends) or not computed (the chi angles).'''
    shape = ca.shape[:-1]
    zero = torch.zeros(*shape, 2, device=ca.device, dtype=ca.dtype)
    angles = [zero.clone() for _ in range(7)]
    mask = torch.zeros(*shape, 7, device=ca.device, dtype=ca.dtype)
    # omega_i: CA(i-1), C(i-1), N(i), CA(i); phi_i: C(i-1), N, CA, C;
    # psi_i: N, CA, C, N(i+1).
    angles[0][..., 1:, :] = dihedral(ca[..., :-1, :], c[..., :-1, :],
                                     n[..., 1:, :], ca[..., 1:, :])
    angles[1][..., 1:, :] = dihedral(c[..., :-1, :], n[..., 1:, :],
                                     ca[..., 1:, :], c[..., 1:, :])
    angles[2][..., :-1, :] = dihedral(n[..., :-1, :], ca[..., :-1, :],
                                      c[..., :-1, :], n[..., 1:, :])
    mask[..., 1:, 0] = mask[..., 1:, 1] = 1
    mask[..., :-1, 2] = 1
    return torch.stack(angles, -2), mask


#: C-beta in its residue's backbone frame (Alg. 21's frame: origin C-alpha,
#: x towards C, N in the xy plane), Angstrom: AlphaFold2's ideal alanine
#: geometry (Engh & Huber).
CB_LOCAL = (-0.529, -0.774, -1.205)
#: Glycine in AlphaFold2's residue order (ARNDCQEGHILKMFPSTWYV): no C-beta.
GLYCINE = 7


def pseudo_beta(frames, aatype):
    '''AlphaFold2's pseudo-beta atom (1.9.8, Alg. 32): the C-beta placed
    ideally in each backbone frame, the C-alpha for glycine.'''
    cb = frames.apply(frames.translations.new_tensor(CB_LOCAL))
    return torch.where((aatype == GLYCINE)[..., None], frames.translations,
                       cb)
