"""AlphaFold2's output heads (supplementary 1.9): distogram (1.9.8),
masked MSA (1.9.9), pLDDT (1.9.6, Alg. 29) and experimentally resolved
(1.9.10). The TM-score head (1.9.7) is off in initial training, as in
OpenFold's ``initial_training`` configuration."""
from torch import nn

from alphafold2.model import DISTOGRAM_BINS

#: Masked MSA classes: 20 amino acids, unknown, gap, mask.
MSA_CLASSES = 23
#: pLDDT: 50 bins of width 2 over lDDT 0-100.
PLDDT_BINS = 50
#: Atoms per residue in AlphaFold2's atom37 representation.
ATOMS = 37


class Heads(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.distogram = nn.Linear(cfg.c_z, DISTOGRAM_BINS)
        self.masked_msa = nn.Linear(cfg.c_m, MSA_CLASSES)
        self.plddt = nn.Sequential(
            nn.LayerNorm(cfg.c_s), nn.Linear(cfg.c_s, cfg.c_plddt),
            nn.ReLU(), nn.Linear(cfg.c_plddt, cfg.c_plddt), nn.ReLU(),
            nn.Linear(cfg.c_plddt, PLDDT_BINS))
        self.experimentally_resolved = nn.Linear(cfg.c_s, ATOMS)

    def forward(self, m, z, s):
        '''*m*: the MSA clusters' rows (template rows dropped), *z* the
        pair and *s* the structure module's final single representation.'''
        distogram = self.distogram(z)
        return {'distogram': distogram + distogram.transpose(-2, -3),
                'masked_msa': self.masked_msa(m),
                'plddt': self.plddt(s),
                'experimentally_resolved': self.experimentally_resolved(s)}
