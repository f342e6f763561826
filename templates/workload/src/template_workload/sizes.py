"""The program's ``--size`` presets (standard library only: the suite's
declaration reads this file by path, so that the numbers have one home).

``benchmark``: what a GPU trains for the figure the suite reports;
``tiny``: the same program at a size a CPU runs in seconds.
"""

#: Size -> the model's width and depth and the batch per rank.
SIZES = {
    'tiny': {'width': 64, 'depth': 2, 'batch_size': 32},
    'benchmark': {'width': 4096, 'depth': 8, 'batch_size': 256},
}
