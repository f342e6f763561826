"""Silent data corruption, found: every rank of every node computes the
same matrix products and training step from the same seed,
deterministically, and the answers are compared (component benchmark
``sdc``; check ``SilentDataCorruption``).

``src/sdc`` computes them and digests each result (what, and the fleet
studies behind it: its package docstring); :mod:`hpctestlib_ml.answers`
compares the digests across ranks and nodes and against the known-good
digest the partition's history holds for the same software stack, and
names the rank whose device computed wrongly. Sizes: ``benchmark`` n 8192
(``MatmulRate``'s), 3 products per precision and a step of a perceptron
2048 wide on a batch of 512, in bf16, fp16, tf32 and fp32 on GPUs; ``tiny``
n 256, 2 products, 64 wide, batch 16, fp32 on CPUs (the same code path).
Every rank computes it all twice (``steps``: the repetitions), so that a
device that is wrong at times shows as well as one that is always wrong,
and a computation that is not deterministic is told from a wrong node.
"""
from hpctestlib_ml import settings
from hpctestlib_ml.parsers import sdc as parser
from hpctestlib_ml.registry import Headline, Workload
from hpctestlib_ml.registry.matmul_rate import PRECISIONS

WORKLOAD = Workload(
    name='sdc', check='SilentDataCorruption', program='sdc',
    parser=parser, kind='component',
    explains='device compute',
    # What the check costs: its answers are its finding, not a figure.
    headline=Headline('answer_s', higher_is_better=False),
    sizes={
        'tiny': {'matrix_size': 256, 'products': 2, 'model_width': 64,
                 'model_batch': 16, 'steps': 2, 'time_limit': '10m'},
        'benchmark': {'matrix_size': 8192, 'products': 3,
                      'model_width': 2048, 'model_batch': 512, 'steps': 2,
                      'time_limit': '10m'},
        # The benchmark's computation: it has no steady state to shorten.
        'short': {'steps': 2, 'time_limit': '10m'},
    },
    data='random matrices and a batch made on each device from one seed',
    names_note='sdc is what the check finds (silent data corruption), as '
               'operators say it',
    variables=settings.variables('sdc', [
        ('matrix_size', 'int', None, "side of the square matrices; default: "
         "the size's", {'minimum': 1}),
        ('products', 'int', None, "matrix products per precision; default: "
         "the size's", {'minimum': 1}),
        ('model_width', 'int', None, "width of the model's training step; "
         "default: the size's", {'minimum': 1}),
        ('model_batch', 'int', None, "samples of its training step; "
         "default: the size's", {'minimum': 1}),
        ('precisions', 'list', [], "precisions to compute in; default: the "
         "device's", {'choices': PRECISIONS}),
    ]))
