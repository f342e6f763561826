"""All-reduce, all-gather and reduce-scatter through ``torch.distributed``
as nccl-tests measures them, as a check (component benchmark
``collectives``): the collectives every data-parallel and sharded
training step waits for, on the same scales and launch modes as the
training checks.

``src/collectives`` times them as nccl-tests does and prints nccl-tests'
format (the definitions of time, algbw and busbw, and their sources: its
package docstring), so ``hpctestlib_ml/parsers/nccl_tests.py`` reads the
check's log and any nccl-tests or rccl-tests log alike (``hpcml extract
collectives LOGFILE``). Sizes: ``benchmark`` 1 KiB to 1 GiB doubling, 20
timed iterations after 5 warm-up (nccl-tests' ``-b 1K -e 1G -f 2 -n 20
-w 5``, the warm-up of its releases before 2.17, whose logs the
published figures come from), buffers on each rank's GPU (NCCL, or RCCL on
ROCm); ``tiny`` 1 KiB to 4 MiB, 5 iterations after 1, Gloo on CPUs.

The headline is the all-reduce's bus bandwidth at the largest size, where
latency no longer counts: the figure cscs-reframe-tests' xccl tests
(``checks/microbenchmarks/xccl/xccl_tests.py``) check, whose
``all_reduce_perf --minbytes 1024M --maxbytes 1024M`` over 2 nodes has
the reference 150 GB/s (-10 %) on every system ('*') of theirs, and
``sendrecv`` 24 GB/s (-5 %): their references are indexed by operation,
the suite's by the operation's perf variable of one case
(``config/references/collectives.yaml``). A case of one rank is not
generated: the bus bandwidth of one rank is 0 by definition.
"""
from hpctestlib_ml import precisions, settings
from hpctestlib_ml.parsers import nccl_tests as parser
from hpctestlib_ml.registry import Headline, Workload

#: The operations, as nccl-tests names its programs (``all_reduce``, ...).
OPERATIONS = tuple(dict(parser.SHORT))

WORKLOAD = Workload(
    name='collectives', check='Collectives', program='collectives',
    parser=parser, kind='component',
    explains='network',
    headline=Headline('allreduce_busbw_GBps'),
    sizes={
        'tiny': {'min_bytes': '1K', 'max_bytes': '4M', 'steps': 5,
                 'warmup_iters': 1, 'time_limit': '10m'},
        'benchmark': {'min_bytes': '1K', 'max_bytes': '1G', 'steps': 20,
                      'warmup_iters': 5, 'time_limit': '20m'},
        # The benchmark's iterations, not the training checks' 100
        # steps (sizes.SHORT_SIZE).
        'short': {'steps': 20, 'time_limit': '20m'},
    },
    # One rank's bus bandwidth is 0 by definition.
    min_world_size=2,
    data="buffers on each rank's device",
    names_note='nccl-tests names its programs <op>_perf; the parser is '
               "nccl_tests (it reads nccl-tests' format), beside nccl, "
               "which reads NCCL's own INFO log",
    precisions=precisions.PROGRAM,
    variables=settings.variables('collectives', [
        ('min_bytes', 'str', None, "smallest message, bytes or 1K/32M/1G; "
         "default: the size's", {'allowed': 'bytes, or a number with K, M '
                                            'or G'}),
        ('max_bytes', 'str', None, "largest message; default: the size's",
         {'allowed': 'bytes, or a number with K, M or G'}),
        ('step_factor', 'int', 2, 'factor from one message size to the next',
         {'minimum': 2}),
        ('warmup_iters', 'int', None, "untimed operations of every size; "
         "default: the size's", {'minimum': 0}),
        ('operations', 'list', [], 'operations to run; default: all',
         {'choices': OPERATIONS}),
    ]))
