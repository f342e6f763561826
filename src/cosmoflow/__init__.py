"""CosmoFlow (MLPerf HPC): a 3D CNN regressing four cosmological parameters
from dark-matter density cubes, ported to PyTorch from the MLPerf HPC
reference (mlcommons/hpc, cosmoflow/models/cosmoflow.py and
configs/cosmo.yaml, v1.0: kernel 3, conv_size 32, dropout 0.5)."""
