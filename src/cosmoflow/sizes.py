"""CosmoFlow's sizes as numbers (no torch here, so the suite's FLOPs and
model-info read the same table the program builds from).

``reference`` is the MLPerf HPC v1.0 model (mlcommons/hpc ``cosmoflow``
``configs/cosmo.yaml``: 4 x 128^3 cubes, conv_size 32); ``tiny`` the same
network on 4 x 32^3 cubes with conv_size 8, for CPUs.
"""

#: Size -> (cube side, conv_size).
SIZES = {'tiny': (32, 8), 'reference': (128, 32)}
