"""AlphaFold2 Evoformer: training FLOPs against the forward's (the table
against a measurement: tests/test_model_info.py), the algorithms'
symmetries, the distogram targets and the program's log."""
import sys

import pytest
import torch

from conftest import REPO, read_data
from hpctestlib_ml.parsers import EXTRACTORS

sys.path.insert(0, str(REPO / 'src'))
import alphafold2.__main__ as program  # noqa: E402
from alphafold2 import model as evoformer  # noqa: E402


def measured_flops(size, backward=False):
    from torch.utils.flop_counter import FlopCounterMode
    config, crop, msa_depth, _ = program.SIZES[size]
    device = 'cpu' if size == 'tiny' else 'meta'  # meta: counts, no math
    with torch.device(device):
        model = evoformer.Evoformer(evoformer.Config(**config))
    features, _ = next(program.synthetic_proteins(
        1, crop, msa_depth, torch.Generator().manual_seed(0)))
    with FlopCounterMode(display=False) as counter:
        out = model(*(t.to(device) for t in features))
        if backward:
            out.sum().backward()
    return counter.get_total_flops()


def test_training_step_costs_three_forwards():
    assert measured_flops('tiny', backward=True) == pytest.approx(
        3 * measured_flops('tiny'), rel=0.02)


def test_evoformer_block_is_equivariant_to_residue_and_sequence_order():
    # Every Evoformer operation treats residues as a set (position enters
    # only through the embedding's relpos) and MSA rows alike: permuting
    # them permutes the output. Mixing up some axes in the attention
    # updates (a bias broadcast on the wrong axis, a mean over residues
    # instead of sequences) breaks this.
    torch.manual_seed(0)
    cfg = evoformer.Config(c_m=16, c_z=8, blocks=1, msa_heads=2,
                           pair_heads=2, c_hidden=4, c_opm=4, c_tri_mul=8)
    block = evoformer.EvoformerBlock(cfg).eval()
    for p in block.parameters():      # zero-initialised outputs hide bugs
        torch.nn.init.normal_(p, std=0.3)
    m, z = torch.randn(1, 5, 7, 16), torch.randn(1, 7, 7, 8)
    residues, rows = torch.randperm(7), torch.randperm(5)
    m_out, z_out = block(m, z)
    m_perm, z_perm = block(m[:, rows][:, :, residues],
                           z[:, residues][:, :, residues])
    torch.testing.assert_close(m_perm, m_out[:, rows][:, :, residues],
                               rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(z_perm, z_out[:, residues][:, :, residues],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('outgoing', [True, False])
def test_triangle_multiplication_follows_algorithms_11_and_12(outgoing):
    # Alg. 11: edge ij from ik and jk; Alg. 12: from ki and kj; written out
    # as loops over the paper's indices.
    torch.manual_seed(0)
    tri = evoformer.TriangleMultiplication(
        evoformer.Config(c_z=4, c_tri_mul=3), outgoing=outgoing)
    z = torch.randn(1, 4, 4, 4)
    zn = tri.norm_in(z)[0]
    a, a_gate, b, b_gate = tri.projections(zn).chunk(4, -1)
    a, b = a * torch.sigmoid(a_gate), b * torch.sigmoid(b_gate)
    expected = torch.empty(4, 4, 4)
    for i in range(4):
        for j in range(4):
            u = sum(a[i, k] * b[j, k] if outgoing else a[k, i] * b[k, j]
                    for k in range(4))
            expected[i, j] = torch.sigmoid(tri.gate(zn[i, j])) * tri.out(
                tri.norm_out(u))
    torch.testing.assert_close(tri(z)[0], expected, rtol=1e-4, atol=1e-5)


def test_distogram_bins_cover_2_to_22_angstrom():
    coords = torch.tensor([[[0., 0, 0], [1., 0, 0], [10., 0, 0],
                            [40., 0, 0]]])
    bins = evoformer.distogram_bins(coords)[0, 0]
    width = (21.6875 - 2.3125) / 62
    assert bins.tolist() == [0, 0, 1 + int((10 - 2.3125) // width), 63]


def test_suites_alphafold2_run_with_two_ranks():
    text = read_data('mllog', 'alphafold2_tiny_cpu_2ranks_torchrun.out')
    m = EXTRACTORS['alphafold2'](text)
    assert m['benchmark'] == 'openfold'
    assert m['world_size'] == 2 and m['global_batch_size'] == 2
    assert m['steps'] == 20 and m['status'] == 'success'
    assert m['samples_per_second'] > 0 and m['losses_finite']
    assert 0 <= m['eval_accuracy'] <= 1
