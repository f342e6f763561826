"""AlphaFold2 Evoformer training (MLPerf HPC OpenFold's trunk); see
``__main__`` and ``model``."""
