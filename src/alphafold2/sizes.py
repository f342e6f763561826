"""AlphaFold2's sizes as numbers (no torch here, so the suite's FLOPs and
model-info read the same table the program builds from).

``reference`` is MLPerf HPC OpenFold's (OpenFold's initial-training
model: 48 Evoformer blocks with c_m 256 and c_z 128, 4 extra-MSA blocks, 2
template pair blocks; crops of 256 residues with 124 MSA clusters, 1024
extra sequences and 4 templates, up to 3 recycles, every block recomputed
in the backward); ``tiny`` the same architecture narrower and shallower,
for CPUs. A size's ``config`` holds the :class:`alphafold2.model.Config`
fields it changes from OpenFold's.
"""
import collections

Size = collections.namedtuple('Size', 'config crop msa_depth extra_msa '
                              'templates max_recycles checkpointing warmup')

SIZES = {
    'tiny': Size(dict(c_m=128, c_z=64, blocks=2, msa_heads=4, pair_heads=2,
                      c_hidden=32, c_opm=16, c_tri_mul=64, c_s=128, c_e=32,
                      extra_blocks=1, c_t=32, template_blocks=1,
                      template_heads=2, ipa_heads=4, c_resnet=64,
                      c_plddt=64),
                 64, 32, 64, 2, 1, False, 0),
    # MLPerf HPC OpenFold's closed rules: 124 clusters (with 4 template
    # rows, OpenFold's 128), 1024 extra sequences, 4 templates, crop 256,
    # 3 recycles; no warm-up (--warmup_lr_iters 0, the reference's
    # default and its README's command: mlcommons/hpc 2c627d4
    # openfold/train.py, openfold/README.md).
    'reference': Size(dict(), 256, 124, 1024, 4, 3, True, 0),
}
