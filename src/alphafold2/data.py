"""MLPerf HPC OpenFold's prepared data (``scripts/preprocess_pdb_mmcif.py``
and ``preprocess_open_protein_set.py`` in mlcommons/hpc ``openfold``), read
into the program's crops:

``DIR/pdb_mmcif/processed/chains.csv``
    one row per chain: ``pdb_chain_id`` (``{pdb_id}_{author_chain_id}``),
    ``pdb_id``, ``author_chain_id``, ``release_date``, ``sequence``, ...
``DIR/pdb_mmcif/processed/dicts/<pdb_id[1:3]>``
    pickles of ``{pdb_id: mmcif_dict}``; ``mmcif_dict['atoms'][chain]``
    holds ``all_atom_positions`` ([R, 37, 3] float32) and ``all_atom_mask``
    ([R, 37] bool), each as (zlib-compressed bytes, shape)
``DIR/open_protein_set/processed/pdb_alignments/{super.index, N.db}``
    the alignments of each chain: ``super.index`` (JSON) maps a chain to
    ``{'db': 'N.db', 'files': [[name, start, size], ...]}``, the byte
    ranges of its ``*.a3m`` files in the shard.

Chains released up to MLPerf's ``train_max_pdb_release_date`` (2021-09-16)
train, later ones evaluate (MLPerf evaluates on CAMEO targets after it).
A chain becomes one crop: a random window of the crop's length (shorter
chains padded, their padding masked), the MSA (query first, the rest in
a random order) split into clusters and extra MSA, with the a3m files'
deletion counts as Table 1's deletion features. Template hits
(``pdb70_hits.hhr``) are not read: the templates' features are empty and
masked.
"""
import csv
import json
import pathlib
import pickle
import zlib

import numpy as np
import torch

from alphafold2.geometry import GLYCINE, frames_from_three_points, pseudo_beta
from alphafold2.proteins import backbone_from_ca, collate, protein_example

TRAIN_MAX_RELEASE_DATE = '2021-09-16'
#: AlphaFold2's residue order and the MSA's gap (class 21).
RESIDUES = 'ARNDCQEGHILKMFPSTWYV'
GAP = 21
UNKNOWN = 20


class DataError(Exception):
    '''The data directory is not MLPerf HPC OpenFold's prepared format.'''


def residue_classes(sequence):
    return [RESIDUES.index(a) if a in RESIDUES else
            GAP if a == '-' else UNKNOWN for a in sequence.upper()]


def parse_a3m(text):
    '''The aligned rows of an a3m file as (residue classes, deletions):
    insertions (lower case) are dropped, and each aligned position counts
    those just before it (AlphaFold2's deletion matrix, Table 1).'''
    rows, current = [], None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('>'):
            if current is not None:
                rows.append(current)
            current = ''
        elif current is not None and line:
            current += line
    if current is not None:
        rows.append(current)
    parsed = []
    for row in rows:
        aligned, deletions, pending = [], [], 0
        for c in row:
            if c.islower():
                pending += 1
            else:
                aligned.append(c)
                deletions.append(pending)
                pending = 0
        if aligned:
            parsed.append((residue_classes(''.join(aligned)), deletions))
    return parsed


def _find(root, *parts):
    for base in (root, *sorted(p for p in root.iterdir() if p.is_dir())):
        path = base.joinpath(*parts)
        if path.exists():
            return path
    raise DataError(f'{root}: no {"/".join(parts)} (MLPerf HPC OpenFold\'s '
                    f'prepared data: see alphafold2.data)')


class OpenFoldData:
    '''Chains, their atoms and their alignments under *root*.'''

    def __init__(self, root):
        root = pathlib.Path(root)
        if not root.is_dir():
            raise DataError(f'{root}: no such directory')
        processed = _find(root, 'pdb_mmcif', 'processed')
        self.dicts = processed / 'dicts'
        with open(processed / 'chains.csv') as f:
            self.chains = list(csv.DictReader(f))
        alignments = _find(root, 'open_protein_set', 'processed',
                           'pdb_alignments')
        self.alignments = alignments
        with open(alignments / 'super.index') as f:
            self.index = json.load(f)
        self._dicts = {}

    def split(self, name):
        '''Chain ids of ``train`` or ``eval`` that have alignments.'''
        train = name == 'train'
        return [c['pdb_chain_id'] for c in self.chains
                if c['pdb_chain_id'] in self.index and
                (c['release_date'] <= TRAIN_MAX_RELEASE_DATE) == train]

    def atoms(self, pdb_chain_id):
        '''(positions [R, 37, 3], mask [R, 37]) of a chain.'''
        pdb_id, chain = pdb_chain_id.split('_', 1)
        key = pdb_id[1:3]
        if key not in self._dicts:
            with open(self.dicts / key, 'rb') as f:
                self._dicts[key] = pickle.load(f)
        atoms = self._dicts[key][pdb_id]['atoms'][chain]

        def unpack(name, dtype):
            data, shape = atoms[name]
            return np.frombuffer(zlib.decompress(data), dtype).reshape(shape)
        return (unpack('all_atom_positions', np.float32),
                unpack('all_atom_mask', bool))

    def msa(self, pdb_chain_id, sequence):
        '''The chain's MSA rows (query first) and their deletion counts,
        from its a3m files.'''
        entry = self.index[pdb_chain_id]
        rows = [residue_classes(sequence)]
        deletions = [[0] * len(sequence)]
        with open(self.alignments / entry['db'], 'rb') as f:
            for name, start, size in entry['files']:
                if not name.endswith('.a3m'):
                    continue
                f.seek(start)
                for row, deleted in parse_a3m(f.read(size).decode()):
                    if len(row) == len(sequence) and row != rows[0]:
                        rows.append(row)
                        deletions.append(deleted)
        return rows, deletions

    def sequence(self, pdb_chain_id):
        return next(c['sequence'] for c in self.chains
                    if c['pdb_chain_id'] == pdb_chain_id)


def chain_example(data, pdb_chain_id, size, generator):
    '''(features, target) of one crop of a chain, the program's format
    (:func:`alphafold2.proteins.protein_example`).'''
    sequence = data.sequence(pdb_chain_id)
    positions, atom_mask = data.atoms(pdb_chain_id)
    rows, deletions = data.msa(pdb_chain_id, sequence)
    length, crop = len(sequence), size.crop
    start = int(torch.randint(max(length - crop, 0) + 1, (),
                              generator=generator))
    window = slice(start, start + crop)
    pad = crop - min(length, crop)

    def padded(x, value=0):
        x = torch.as_tensor(np.asarray(x))[..., window]
        return torch.nn.functional.pad(x, (0, pad), value=value)

    aatype = padded(residue_classes(sequence), UNKNOWN)
    msa = padded(rows, GAP)
    order = torch.cat([torch.zeros(1, dtype=torch.long), 1 + torch.randperm(
        len(rows) - 1, generator=generator)])
    msa, deletions = msa[order], padded(deletions)[order]
    clusters, extra = msa[:size.msa_depth], msa[size.msa_depth:]
    cluster_deletions = deletions[:size.msa_depth]
    extra_deletions = deletions[size.msa_depth:]
    if len(extra):
        extra = extra[:size.extra_msa]
        extra_deletions = extra_deletions[:size.extra_msa]
    else:
        extra, extra_deletions = msa[:1], deletions[:1]
    atoms = torch.from_numpy(positions.copy())[window]
    present = torch.from_numpy(atom_mask.copy())[window].float()
    atoms = torch.nn.functional.pad(atoms, (0, 0, 0, 0, 0, pad))
    present = torch.nn.functional.pad(present, (0, 0, 0, pad))
    residue_mask = present[:, :3].prod(-1)           # N, CA and C resolved
    # Unresolved residues get a placeholder backbone, masked out of the
    # losses, so that their frames are defined.
    line = torch.arange(crop, dtype=torch.float)[:, None] * torch.tensor(
        [3.8, 0.0, 0.0]) + torch.tensor([0.0, 0.1, 0.0]) * (
            torch.arange(crop) % 2)[:, None]
    ca = torch.where(residue_mask[:, None].bool(), atoms[:, 1], line)
    n_line, c_line = backbone_from_ca(line)
    n = torch.where(residue_mask[:, None].bool(), atoms[:, 0], n_line)
    c = torch.where(residue_mask[:, None].bool(), atoms[:, 2], c_line)
    # The distogram's atoms: the resolved C-beta, else placed ideally.
    ideal = pseudo_beta(frames_from_three_points(n, ca, c), aatype)
    has_cb = present[:, 3].bool() & (aatype != GLYCINE)
    beta = torch.where(has_cb[:, None], atoms[:, 3], ideal)
    templates = size.templates
    features, target = protein_example(
        aatype, n, ca, c, clusters, extra,
        torch.full((templates, crop), UNKNOWN), ca.expand(templates, crop, 3),
        n.expand(templates, crop, 3), c.expand(templates, crop, 3),
        generator, residue_index=start + torch.arange(crop),
        residue_mask=residue_mask, resolved=present, template_mask=0,
        pseudo_beta_x=beta, deletions=(cluster_deletions, extra_deletions),
        seq_mask=(torch.arange(crop) < length - start).float())
    return features, target


def openfold_batches(root, split, size, batch, generator, rank, world):
    '''Yield (features, target) batches of *split*'s chains, this rank's
    share (every *world*-th chain from *rank*), in a random order each
    pass.'''
    data = OpenFoldData(root)
    chains = data.split(split)[rank::world]
    if not chains:
        raise DataError(f'{root}: no {split} chain for rank {rank} (train: '
                        f'released up to {TRAIN_MAX_RELEASE_DATE}, eval: '
                        f'after)')

    def examples():
        while True:
            for i in torch.randperm(len(chains), generator=generator):
                yield chain_example(data, chains[int(i)], size, generator)

    stream = examples()
    while True:
        yield collate([next(stream) for _ in range(batch)])
