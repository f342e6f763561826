"""AlphaFold2 training as MLPerf HPC OpenFold runs it (OpenFold's initial
training); see ``__main__``, ``alphafold`` and ``model``."""
