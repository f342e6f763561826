"""AlphaFold2: OpenFold's parameter count component by component,
training FLOPs against the forward's (the table against a measurement:
tests/test_model_info.py), the algorithms' symmetries (Evoformer
equivariance, invariant point attention and FAPE invariant to a global
rotation and translation), lDDT on known structures, the distogram
targets and the program's log."""
import math
import sys

import pytest
import torch

from conftest import REPO, extract, read_data
from hpctestlib_ml import flops

sys.path.insert(0, str(REPO / 'src'))
import alphafold2.__main__ as program  # noqa: E402
from alphafold2 import geometry, losses, structure  # noqa: E402
from alphafold2 import proteins, sizes  # noqa: E402
from alphafold2 import model as evoformer  # noqa: E402


def measured_flops(size, backward=False):
    from torch.utils.flop_counter import FlopCounterMode
    spec = sizes.SIZES[size]
    device = 'cpu' if size == 'tiny' else 'meta'  # meta: counts, no math
    with torch.device(device):
        model = proteins.build_model(spec)
    features, _ = next(proteins.synthetic_proteins(
        1, spec, torch.Generator().manual_seed(0)))
    with FlopCounterMode(display=False) as counter:
        out = model(*(t.to(device) for t in features), 0)
        if backward:
            sum(out[k].sum() for k in ('distogram', 'masked_msa', 'plddt',
                                       'experimentally_resolved', 'angles')
                ).add(out['frames'].translations.sum()).backward()
    return counter.get_total_flops()


def test_training_step_costs_three_forwards():
    assert measured_flops('tiny', backward=True) == pytest.approx(
        3 * measured_flops('tiny'), rel=0.02)


def test_mean_recycles_are_the_programs():
    for size, spec in sizes.SIZES.items():
        assert flops.alphafold2_mean_recycles(size) == spec.max_recycles / 2


def count(module):
    return sum(p.numel() for p in module.parameters())


def test_reference_model_is_openfolds_component_by_component():
    # Issue 16's accounting against OpenFold's initial-training model:
    # the trunk (input embedder, 48 Evoformer blocks, distogram head)
    # 87,878,976 and what the whole model adds to it.
    with torch.device('meta'):
        model = proteins.build_model(sizes.SIZES['reference'])
    distogram = count(model.heads.distogram)
    assert count(model.embed) + count(model.blocks) + distogram == \
        87_878_976
    assert count(model.extra_msa.blocks) == 2_805_248
    assert count(model.extra_msa.embed) == 1_664
    assert count(model.structure) == 2_019_116
    assert count(model.templates) == 329_408
    assert count(model.single) == 98_688
    assert count(model.heads) - distogram == 93_166
    assert count(model.recycle) == 2_816
    assert count(model) == 93_229_082


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
    masks = torch.ones(1, 5, 7), torch.ones(1, 7, 7)
    m_out, z_out = block(m, z, *masks)
    m_perm, z_perm = block(m[:, rows][:, :, residues],
                           z[:, residues][:, :, residues], *masks)
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
    torch.testing.assert_close(tri(z, torch.ones(1, 4, 4))[0], expected, rtol=1e-4, atol=1e-5)


def test_distogram_bins_cover_2_to_22_angstrom():
    coords = torch.tensor([[[0., 0, 0], [1., 0, 0], [10., 0, 0],
                            [40., 0, 0]]])
    bins = evoformer.distogram_bins(coords)[0, 0]
    width = (21.6875 - 2.3125) / 62
    assert bins.tolist() == [0, 0, 1 + int((10 - 2.3125) // width), 63]


def random_rotation(generator):
    q = torch.randn(4, generator=generator)
    return geometry.quaternion_update(torch.cat([q[1:] / q[0],
                                                 torch.zeros(3)])).rotations


def random_frames(residues, generator):
    x = 5 * torch.randn(3, residues, 3, generator=generator)
    return geometry.frames_from_three_points(*x)


def moved(frames, rotation, shift):
    return geometry.Frames(rotation @ frames.rotations,
                           (rotation @ frames.translations[..., None])[..., 0]
                           + shift)


def test_invariant_point_attention_is_invariant_to_global_motion():
    # Alg. 22: the output does not change when every frame is rotated and
    # moved by the same rigid transform (the points enter only through
    # distances and through the query's own frame).
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    cfg = evoformer.Config(c_s=16, c_z=8, ipa_heads=3, c_ipa=4, qk_points=2,
                           v_points=3)
    ipa = structure.InvariantPointAttention(cfg)
    for p in ipa.parameters():        # the zero-initialised output hides
        torch.nn.init.normal_(p, std=0.3)
    s, z = torch.randn(1, 6, 16), torch.randn(1, 6, 6, 8)
    frames = random_frames(6, g)
    frames = geometry.Frames(frames.rotations[None], frames.translations[None])
    rotation, shift = random_rotation(g), 7 * torch.randn(3, generator=g)
    mask = torch.ones(1, 6)
    out = ipa(s, z, frames, mask)
    torch.testing.assert_close(ipa(s, z, moved(frames, rotation, shift),
                                   mask),
                               out, rtol=1e-4, atol=1e-4)
    # ... and it does see the frames: move one residue alone.
    alone = geometry.Frames(frames.rotations.clone(),
                            frames.translations.clone())
    alone.translations[0, 0] += 3
    assert not torch.allclose(ipa(s, z, alone, mask), out, atol=1e-3)


def test_fape_is_invariant_to_global_motion_of_either_structure():
    g = torch.Generator().manual_seed(1)
    true, pred = random_frames(8, g), random_frames(8, g)
    loss = losses.fape(pred, true, pred.translations, true.translations)
    for which in ('pred', 'true'):
        rotation, shift = random_rotation(g), 5 * torch.randn(3, generator=g)
        p = moved(pred, rotation, shift) if which == 'pred' else pred
        t = moved(true, rotation, shift) if which == 'true' else true
        torch.testing.assert_close(losses.fape(p, t, p.translations,
                                               t.translations), loss)
    assert loss > 0.1
    assert losses.fape(true, true, true.translations, true.translations,
                       eps=0) == 0


def test_fape_clamps_at_10_angstrom_and_scales_by_10():
    frames = geometry.Frames.identity((2,))
    true = torch.tensor([[0., 0, 0], [3., 0, 0]])
    # Atom 1 off by 4 A in both frames (identity frames): mean over the
    # 2 x 2 frame-atom pairs of (0, 4, 0, 4) / 10.
    assert losses.fape(frames, frames, true + torch.tensor([[0.], [4.]]) *
                       torch.tensor([0., 1, 0]), true, eps=0) == \
        pytest.approx(0.2)
    far = true + torch.tensor([[0.], [40.]]) * torch.tensor([0., 1, 0])
    assert losses.fape(frames, frames, far, true, eps=0) == \
        pytest.approx(0.5)


def test_lddt_on_known_structures():
    # A straight chain 3.8 A apart: pairs within 15 A are those up to 3
    # residues apart.
    ca = torch.arange(10.)[:, None] * torch.tensor([3.8, 0, 0])
    assert losses.lddt(ca, ca) == pytest.approx(1.0)
    # Rotated and moved: distances do not change.
    g = torch.Generator().manual_seed(2)
    assert losses.lddt(ca @ random_rotation(g).T + 3, ca) == \
        pytest.approx(1.0)
    # Stretched by 1.2: a pair k apart is off by 0.76 k A, under 1, 2
    # and 4 A for k = 1 (3/4), 2 and 4 A for k = 2 (2/4), 4 A for k = 3
    # (1/4); 9, 8 and 7 pairs of each, both ways.
    expected = (9 * 3 / 4 + 8 * 2 / 4 + 7 * 1 / 4) / (9 + 8 + 7)
    assert losses.lddt(1.2 * ca, ca) == pytest.approx(expected)
    # A point placed 20 A off its place spoils the pairs it is in.
    off = ca.clone()
    off[0, 1] += 20
    per_residue = losses.lddt(off, ca, per_residue=True)
    assert per_residue[0] == 0 and per_residue[5] == 1


def test_frames_from_three_points_and_backbone_torsions():
    g = torch.Generator().manual_seed(3)
    ca = torch.randn(12, 3, generator=g).cumsum(0) * 3
    n, c = proteins.backbone_from_ca(ca)
    frames = geometry.frames_from_three_points(n, ca, c)
    eye = torch.eye(3).expand(12, 3, 3)
    torch.testing.assert_close(frames.rotations.transpose(-1, -2) @
                               frames.rotations, eye, atol=1e-5, rtol=0)
    local_c = frames.invert_apply(c)
    assert (local_c[:, 1:].abs() < 1e-5).all() and (local_c[:, 0] > 0).all()
    angles, mask = geometry.backbone_torsions(n, ca, c)
    torch.testing.assert_close(angles.norm(dim=-1)[mask.bool()],
                               torch.ones(int(mask.sum())))
    assert mask[0].tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert mask[-1].tolist() == [1, 1, 0, 0, 0, 0, 0]


def test_pseudo_beta_is_an_ideal_c_beta_and_glycines_c_alpha():
    g = torch.Generator().manual_seed(4)
    ca = torch.randn(6, 3, generator=g).cumsum(0) * 3
    n, c = proteins.backbone_from_ca(ca)
    frames = geometry.frames_from_three_points(n, ca, c)
    aatype = torch.tensor([0, geometry.GLYCINE, 3, 4, 5, 6])
    beta = geometry.pseudo_beta(frames, aatype)
    torch.testing.assert_close(beta[1], ca[1])
    bond = (beta - ca).norm(dim=-1)[[0, 2, 3, 4, 5]]
    torch.testing.assert_close(bond, torch.full((5,), 1.527), atol=1e-3,
                               rtol=0)
    # Tetrahedral: about 110 degrees from both N and C.
    for other in (n, c):
        u, v = beta - ca, other - ca
        angle = torch.rad2deg(torch.acos((u * v).sum(-1) / (
            u.norm(dim=-1) * v.norm(dim=-1))))[[0, 2]]
        assert ((angle > 100) & (angle < 120)).all(), angle


def test_msa_is_masked_as_alphafold2_masks_it():
    g = torch.Generator().manual_seed(6)
    msa = torch.randint(20, (200, 100), generator=g)
    masked_msa, mask = proteins.bert_mask(msa, g)
    assert mask.float().mean() == pytest.approx(0.15, abs=0.01)
    assert (masked_msa[~mask] == msa[~mask]).all()
    tokens = (masked_msa[mask] == proteins.MASK_TOKEN).float().mean()
    assert tokens == pytest.approx(0.7, abs=0.03)


def test_unclamped_fape_grows_with_the_error():
    frames = geometry.Frames.identity((2,))
    true = torch.tensor([[0., 0, 0], [3., 0, 0]])
    far = true + torch.tensor([[0.], [40.]]) * torch.tensor([0., 1, 0])
    assert losses.fape(frames, frames, far, true, clamp=None, eps=0) == \
        pytest.approx(2.0)


def test_structure_module_predicts_frames_that_train_towards_the_truth():
    # A few Adam steps on one synthetic protein lower the final FAPE: the
    # frames' gradients reach the single representation.
    torch.manual_seed(0)
    spec = sizes.SIZES['tiny']
    features, target = next(proteins.synthetic_proteins(
        1, spec, torch.Generator().manual_seed(0)))
    model = proteins.build_model(spec)
    backbone = target.pop('backbone')
    target['frames'] = geometry.frames_from_three_points(
        *backbone.unbind(-2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    first = None
    for _ in range(4):
        out = model(*features, 0)
        loss, terms = losses.alphafold_loss(out, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first = first or {k: v.item() for k, v in terms.items()}
        assert math.isfinite(loss.item())
    assert set(first) == set(losses.WEIGHTS)
    assert terms['distogram'] < first['distogram']
    assert terms['masked_msa'] < first['masked_msa']
    assert out['frames'].translations.shape == (8, 1, 64, 3)


def test_recycles_are_drawn_alike_on_every_rank_and_maximal_in_eval():
    spec = sizes.SIZES['tiny']
    a, b = (proteins.build_model(spec, seed=1) for _ in range(2))
    draws = [int(torch.randint(2, (), generator=m.recycle_generator))
             for m in (a, b) for _ in range(8)]
    assert draws[:8] == draws[8:] and set(draws) == {0, 1}


def write_openfold_records(root, chains):
    """MLPerf HPC OpenFold's prepared format (alphafold2.data) for
    *chains*: (pdb_chain_id, release date, length); each a persistent
    random walk with its third residue unresolved and an a3m of mutated
    copies (one with an insertion, which the reader drops)."""
    import csv
    import json
    import pickle
    import zlib
    import numpy as np
    from alphafold2 import data
    g = torch.Generator().manual_seed(5)
    processed = root / 'pdb_mmcif' / 'processed'
    (processed / 'dicts').mkdir(parents=True)
    alignments = root / 'open_protein_set' / 'processed' / 'pdb_alignments'
    alignments.mkdir(parents=True)
    dicts, index, rows, db, truth = {}, {}, [], b'', {}
    for pdb_chain_id, date, length in chains:
        pdb_id, chain = pdb_chain_id.split('_')
        aatype = torch.randint(20, (length,), generator=g)
        sequence = ''.join(data.RESIDUES[i] for i in aatype)
        steps = torch.randn(length, 3, generator=g)
        ca = (3.8 * steps / steps.norm(dim=-1, keepdim=True)).cumsum(0)
        n, c = proteins.backbone_from_ca(ca)
        positions = np.zeros((length, 37, 3), np.float32)
        mask = np.zeros((length, 37), bool)
        positions[:, 0], positions[:, 1], positions[:, 2] = n, ca, c
        mask[:, [0, 1, 2]] = True
        positions[2], mask[2] = 0, False
        truth[pdb_chain_id] = (sequence, positions, mask)
        atoms = {chain: {
            'all_atom_positions': (zlib.compress(positions.tobytes()),
                                   positions.shape),
            'all_atom_mask': (zlib.compress(mask.tobytes()), mask.shape)}}
        dicts.setdefault(pdb_id[1:3], {})[pdb_id] = {
            'pdb_id': pdb_id, 'release_date': date, 'atoms': atoms,
            'sequences': {chain: sequence}, 'author_chain_ids': [chain]}
        rows.append({'pdb_chain_id': pdb_chain_id, 'pdb_id': pdb_id,
                     'author_chain_id': chain, 'release_date': date,
                     'sequence_length': length, 'sequence': sequence})
        hits = ['>query', sequence]
        for k in range(5):
            mutated = list(sequence)
            mutated[k] = '-'
            mutated[k + 5] = 'A'
            if k == 0:
                mutated[10] += 'kl'           # an insertion
            hits += [f'>hit{k}', ''.join(mutated)]
        a3m = ('\n'.join(hits) + '\n').encode()
        index[pdb_chain_id] = {'db': '0.db', 'files': [
            ['uniref90_hits.a3m', len(db), len(a3m)]]}
        db += a3m
    for key, value in dicts.items():
        with open(processed / 'dicts' / key, 'wb') as f:
            pickle.dump(value, f)
    with open(processed / 'chains.csv', 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (alignments / '0.db').write_bytes(db)
    (alignments / 'super.index').write_text(json.dumps(index))
    return truth


CHAINS = [('1abc_A', '2010-01-01', 80), ('2xyz_B', '2015-05-05', 50),
          ('7new_A', '2021-10-01', 70)]


def test_openfold_records_are_read_as_written(tmp_path):
    from alphafold2 import data
    truth = write_openfold_records(tmp_path, CHAINS)
    records = data.OpenFoldData(tmp_path)
    assert records.split('train') == ['1abc_A', '2xyz_B']
    assert records.split('eval') == ['7new_A']
    sequence, positions, mask = truth['2xyz_B']
    got_positions, got_mask = records.atoms('2xyz_B')
    assert (got_positions == positions).all() and (got_mask == mask).all()
    msa, deletions = records.msa('2xyz_B', sequence)
    assert len(msa) == 6 and msa[0] == data.residue_classes(sequence)
    assert msa[1][0] == data.GAP and all(len(r) == 50 for r in msa)
    # hit0's insertion 'kl' after its residue 10: two deletions at 11.
    assert deletions[1][11] == 2 and sum(map(sum, deletions)) == 2
    # A 50-residue chain in a 64-residue crop: padded and masked.
    spec = sizes.SIZES['tiny']
    features, target = data.chain_example(records, '2xyz_B', spec,
                                          torch.Generator().manual_seed(0))
    mask = target['residue_mask'][0]
    assert mask.shape == (64,) and mask[:50].sum() == 49 and \
        mask[50:].sum() == 0
    torch.testing.assert_close(target['ca'][0, :2],
                               torch.from_numpy(positions[:2, 1]))
    assert features[2].shape[1] == 6             # clusters: every row
    msa_feat = features[2][0]
    assert msa_feat[..., 23].sum() == 1          # has_deletion, once
    assert msa_feat[..., 24].max() == pytest.approx(
        2 / math.pi * math.atan(2 / 3))
    assert features[3].shape[1] == 1             # extra MSA: the query


def logged_values(text):
    '''{key: value} of a run's MLLOG lines.'''
    import json
    values = {}
    for line in text.splitlines():
        if ':::MLLOG' in line:
            record = json.loads(line.split(':::MLLOG', 1)[1])
            values[record['key']] = record['value']
    return values


def test_program_trains_on_openfold_records(tmp_path):
    import os
    import subprocess
    write_openfold_records(tmp_path, CHAINS)
    proc = subprocess.run(
        [sys.executable, '-m', 'alphafold2', '--data', str(tmp_path),
         '--steps', '2', '--eval-batches', '1'],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src')},
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = extract('alphafold2', proc.stdout + proc.stderr)
    assert m['status'] == 'success' and m['losses_finite']
    assert 0 <= m['eval_accuracy'] <= 1
    # The loss terms logged under OpenFold's names are what they are: no
    # side-chain FAPE, no chi loss, no warm-up.
    logged = logged_values(proc.stdout + proc.stderr)
    assert logged['fape_loss_backbone_weight'] == 0.5
    assert logged['fape_loss_sidechain_weight'] == 0.0
    assert logged['supervised_chi_loss_weight'] == 0.0
    assert logged['fape_loss_final_backbone_weight'] == 0.5
    assert logged['backbone_torsion_loss_weight'] == 0.5
    assert logged['opt_learning_rate_warmup_steps'] == 0
    proc = subprocess.run(
        [sys.executable, '-m', 'alphafold2', '--data', str(tmp_path / 'no')],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src')},
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode != 0
    assert 'No such file or directory' in proc.stderr


def test_suites_alphafold2_run_with_two_ranks():
    text = read_data('mllog', 'alphafold2_tiny_cpu_2ranks_torchrun.out')
    m = extract('alphafold2', text)
    assert m['benchmark'] == 'openfold'
    assert m['world_size'] == 2 and m['global_batch_size'] == 2
    assert m['steps'] == 20 and m['status'] == 'success'
    assert m['samples_per_second'] > 0 and m['losses_finite']
    assert 0 <= m['eval_accuracy'] <= 1


def small_alphafold(seed=0):
    '''A narrow AlphaFold2 (every module, two structure layers), every
    parameter jittered: zero-initialised output layers would hide
    what reaches them.'''
    from alphafold2.alphafold import AlphaFold2
    torch.manual_seed(seed)
    cfg = evoformer.Config(c_m=16, c_z=8, blocks=1, msa_heads=2,
                           pair_heads=2, c_hidden=4, c_opm=4, c_tri_mul=8,
                           c_s=16, c_e=8, extra_blocks=1, c_hidden_extra=4,
                           c_t=8, template_blocks=1, c_hidden_template=4,
                           template_heads=2, ipa_heads=2, c_ipa=4,
                           qk_points=2, v_points=2, structure_layers=2,
                           c_resnet=8, c_plddt=8)
    model = AlphaFold2(cfg, max_recycles=1).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def crop_features(features, residues):
    '''The first *residues* of a crop's features (the model's inputs).'''
    target_feat, index, msa, extra, pair, angle, seq, msa_mask, \
        extra_mask, template_mask = features
    r = slice(0, residues)
    return (target_feat[:, r], index[:, r], msa[:, :, r], extra[:, :, r],
            pair[:, :, r, r], angle[:, :, r], seq[:, r], msa_mask[:, :, r],
            extra_mask[:, :, r], template_mask)


def padded_features(features, real, fill):
    '''*features* with residues from *real* on padding: their content
    replaced by *fill*'s (features of the same shape) and masked out.'''
    out = []
    for name, x, y in zip(('target', 'index', 'msa', 'extra', 'pair',
                           'angle'), features[:6], fill[:6]):
        x = x.clone()
        axis = {'target': 1, 'index': 1, 'msa': 2, 'extra': 2, 'pair': 2,
                'angle': 2}[name]
        x.narrow(axis, real, x.shape[axis] - real).copy_(
            y.narrow(axis, real, x.shape[axis] - real))
        if name == 'pair':
            x[:, :, :real, real:] = y[:, :, :real, real:]
        out.append(x)
    seq = features[6].clone()
    seq[:, real:] = 0
    return tuple(out) + (seq, seq[:, None].expand_as(features[7]),
                         seq[:, None].expand_as(features[8]), features[9])


def real_outputs(out, real):
    '''The outputs at the first *real* residues.'''
    return {'distogram': out['distogram'][:, :real, :real],
            'masked_msa': out['masked_msa'][:, :, :real],
            'plddt': out['plddt'][:, :real],
            'positions': out['frames'].translations[:, :, :real],
            'angles': out['angles'][:, :, :real]}


def test_padding_does_not_change_the_outputs_at_real_residues():
    # OpenFold masks padded residues out of every attention, triangle
    # update and outer product mean: a 12-residue protein gives the same
    # outputs alone, padded to 16 and padded with other content.
    spec = sizes.Size({}, 16, 5, 6, 2, 1, False, 0)
    g = torch.Generator().manual_seed(3)
    features, _ = proteins.synthetic_protein(spec, g)
    other, _ = proteins.synthetic_protein(spec, g)
    model = small_alphafold()
    with torch.no_grad():
        alone = real_outputs(model(*crop_features(features, 12), 1), 12)
        padded = real_outputs(model(*padded_features(features, 12,
                                                     features), 1), 12)
        refilled = real_outputs(model(*padded_features(features, 12,
                                                       other), 1), 12)
        unmasked = real_outputs(model(*features, 1), 12)
    for name, value in alone.items():
        torch.testing.assert_close(padded[name], value, rtol=1e-4,
                                   atol=1e-5, msg=name)
        torch.testing.assert_close(refilled[name], value, rtol=1e-4,
                                   atol=1e-5, msg=name)
    # The same residues as real ones do change them: the test sees them.
    assert not torch.allclose(unmasked['distogram'], alone['distogram'],
                              atol=1e-4)


def test_loss_is_scaled_by_the_square_root_of_the_crops_residues():
    # OpenFold's AlphaFoldLoss: each crop's weighted total times
    # sqrt(min(seq_length, crop_size)), then the batch mean. Two crops of
    # 64: one full, one a 40-residue chain padded.
    spec = sizes.SIZES['tiny']
    g = torch.Generator().manual_seed(0)
    features, target = proteins.collate(
        [proteins.synthetic_protein(spec, g) for _ in range(2)])
    target['seq_mask'][1, 40:] = 0
    target['residue_mask'][1, 40:] = 0
    model = proteins.build_model(spec)
    with torch.no_grad():
        out = model(*features, 0)
    backbone = target.pop('backbone')
    target['frames'] = geometry.frames_from_three_points(
        *backbone.unbind(-2))
    loss, _ = losses.alphafold_loss(out, target)
    terms = losses.per_crop_terms(out, target, True)
    weighted = [sum(losses.WEIGHTS[k] * v[b] for k, v in terms.items())
                for b in range(2)]
    expected = (math.sqrt(64) * weighted[0] + math.sqrt(40) * weighted[1]) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert set(terms) == set(losses.WEIGHTS)


def test_angle_norm_penalty_is_openfolds_over_the_crops_residues():
    # |sqrt(|a|^2 + 1e-8) - 1| averaged over layers, real residues and all
    # seven angles: angles of norm 2 at 3 real residues give 1, whatever
    # the padded residue holds.
    angles = torch.zeros(2, 1, 4, 7, 2)
    angles[..., 0] = 2.0
    angles[:, :, 3] = 50.0                       # padding
    seq_mask = torch.tensor([[1., 1, 1, 0]])
    assert losses.angle_norm_loss(angles, seq_mask).item() == \
        pytest.approx(math.sqrt(4 + 1e-8) - 1)


def test_learning_rate_is_the_benchmarks_constant_without_warm_up():
    # MLPerf HPC OpenFold runs --base_lr 1e-3 --warmup_lr_iters 0 from
    # its checkpoint: 1e-3 from iteration 1.
    warmup = sizes.SIZES['reference'].warmup
    assert warmup == 0
    assert program.learning_rate(1, warmup) == 1e-3
    # A warm-up, where one is asked for, is OpenFoldBenchmarkLRScheduler's
    # linspace(warmup_lr_init, base_lr, warmup_lr_iters) from iteration 1.
    line = torch.linspace(1e-5, 1e-3, 5, dtype=torch.float64)
    assert [program.learning_rate(i, 5) for i in range(1, 7)] == \
        pytest.approx(line.tolist() + [1e-3], rel=1e-9)
