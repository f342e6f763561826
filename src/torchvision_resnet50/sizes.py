"""The program's ``--size`` presets as numbers (standard library only, so
that the suite's check and model-info read the same table the program
runs from).

``benchmark`` is Horovod's and EESSI's defaults (batch 32 per rank, 224
px, 10 warm-up batches, 10 iterations of 10 batches); ``tiny`` the same
program at a size a CPU runs in seconds.
"""

SIZES = {
    'benchmark': {'image_size': 224, 'batch_size': 32,
                  'num_warmup_batches': 10, 'num_batches_per_iter': 10,
                  'num_iters': 10},
    'tiny': {'image_size': 32, 'batch_size': 4, 'num_warmup_batches': 1,
             'num_batches_per_iter': 2, 'num_iters': 3},
}
