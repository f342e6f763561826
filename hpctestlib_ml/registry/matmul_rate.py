"""The device's achievable matrix-multiply rate per precision, as a check
(component benchmark ``matmul_rate``): what ``hpcml cpu-peak`` measures
for CPUs, for GPUs too, beside the data-sheet peak MFU divides by.

``src/matmul_rate`` measures it (square ``torch.mm`` products, ``2 n^3``
FLOPs each, the queue drained before each clock read: the measurement
``hpcml cpu-peak`` and the GPU validation's probes share), on every rank's
own device at once. Sizes: ``benchmark`` n 8192 (the GPU probes'), 10
timed iterations of 10 products per precision after 3 warm-up ones, or
more of each so that the warm-up lasts 1 s and the timed ones 2 s, in
bf16, fp16, tf32 and fp32 on GPUs; ``tiny`` n 512 on CPUs, fp32 only (the
precision every workload trains in on CPUs, and the one MFU's CPU peak is
measured in).
"""
from hpctestlib_ml import settings
from hpctestlib_ml.parsers import matmul_rate as parser
from hpctestlib_ml.registry import Headline, Workload

#: What it measures: every precision its program knows.
PRECISIONS = ('bf16', 'fp16', 'tf32', 'fp32')

WORKLOAD = Workload(
    name='matmul_rate', check='MatmulRate', program='matmul_rate',
    parser=parser, kind='component',
    explains='device compute',
    # fp32: the one precision every device measures.
    headline=Headline('fp32_tflops'),
    sizes={
        # 512: at 256 a 2-core VM's products took under a millisecond,
        # and thread start-up and noise moved the rate 10-fold.
        # Counts only: the CPU default stays a few seconds.
        'tiny': {'matrix_size': 512, 'steps': 5, 'products_per_iteration': 8,
                 'warmup_products': 4, 'warmup_seconds': 0.0,
                 'measure_seconds': 0.0, 'time_limit': '10m'},
        # 10 x 10 n 8192 bf16 products took 0.14 s on an H200 (790
        # TFLOP/s), after 4 ms of warm-up: too short for its clocks and
        # power to settle; at least 1 s of warm-up and 2 s timed per
        # precision instead.
        'benchmark': {'matrix_size': 8192, 'steps': 10,
                      'products_per_iteration': 10, 'warmup_products': 3,
                      'warmup_seconds': 1.0, 'measure_seconds': 2.0,
                      'time_limit': '10m'},
        # The benchmark's iterations, not the training checks' 100
        # steps (sizes.SHORT_SIZE).
        'short': {'steps': 10, 'time_limit': '10m'},
    },
    data='random matrices made on each device',
    variables=settings.variables('matmul_rate', [
        ('matrix_size', 'int', None, "side of the square matrices; default: "
         "the size's", {'minimum': 1}),
        ('products_per_iteration', 'int', None, "products timed together; "
         "default: the size's", {'minimum': 1}),
        ('warmup_products', 'int', None, "untimed products first; default: "
         "the size's", {'minimum': 0}),
        ('warmup_seconds', 'float', None, "least seconds of untimed "
         "products before each precision's timed ones; default: the "
         "size's", {'minimum': 0}),
        ('measure_seconds', 'float', None, "least seconds each precision's "
         "timed products last together; default: the size's",
         {'minimum': 0}),
        ('precisions', 'list', [], "precisions to measure; default: the "
         "device's", {'choices': PRECISIONS}),
    ]))
