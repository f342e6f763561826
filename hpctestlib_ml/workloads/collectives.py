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
from reframe.core.builtins import performance_function, variable
import reframe.utility.typecheck as typ

from hpctestlib_ml import precisions
from hpctestlib_ml.base import ComponentTest
from hpctestlib_ml.parsers import nccl_tests as parser
from hpctestlib_ml.workloads import Headline, Workload

#: The operations, by their perflog name (``<name>_busbw_GBps``).
OPERATIONS = dict(parser.SHORT)


class CollectivesBenchmark(ComponentTest):
    '''nccl-tests' all-reduce, all-gather and reduce-scatter, through
    ``torch.distributed``.

    .. list-table:: Summary (beside ComponentTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``min_bytes``, ``max_bytes``, ``step_factor``, ``warmup_iters``,
           ``operations``; ``steps`` are the timed iterations per size,
           ``precision`` the buffers' type
       * - Metrics
         - ``allreduce_busbw_GBps``, ``allgather_busbw_GBps``,
           ``reducescatter_busbw_GBps`` (GB/s, bus bandwidth at the
           largest size), ``allreduce_latency_us`` (us, the time of one
           all-reduce of the smallest size)
       * - Partition extras
         - none
    '''

    workload = 'collectives'
    program = 'collectives'
    # One rank's bus bandwidth is 0 by definition.
    min_world_size = 2
    sizes = {
        'tiny': {'min_bytes': '1K', 'max_bytes': '4M', 'steps': 5,
                 'warmup_iters': 1, 'time_limit': '10m'},
        'benchmark': {'min_bytes': '1K', 'max_bytes': '1G', 'steps': 20,
                      'warmup_iters': 5, 'time_limit': '20m'},
        # The benchmark's iterations, not the training checks' 100
        # steps (sizes.SHORT_SIZE).
        'short': {'steps': 20, 'time_limit': '20m'},
    }

    #: Smallest message, bytes or nccl-tests' ``1K``/``32M``/``1G``
    #: (``-b``).
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the size's: ``1K``)
    min_bytes = variable(str, type(None), value=None)

    #: Largest message (``-e``); the headline figures are read there.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the size's: ``1G``, ``tiny`` ``4M``)
    max_bytes = variable(str, type(None), value=None)

    #: Factor from one size to the next (``-f``).
    #:
    #: :type: :class:`int`
    #: :default: ``2``
    step_factor = variable(str, int, value=2)

    #: Untimed operations of every size before the timing (``-w``).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 5, ``tiny`` 1)
    warmup_iters = variable(str, int, type(None), value=None)

    #: Operations to run, of ``all_reduce``, ``all_gather``,
    #: ``reduce_scatter``.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]`` (all three)
    operations = variable(typ.List[str], value=[])

    def finalize_settings(self):
        self.operations = list(self.operations or OPERATIONS)
        for op, name in OPERATIONS.items():
            if op not in self.operations:
                self.perf_variables.pop(f'{name}_busbw_GBps', None)
        if 'all_reduce' not in self.operations:
            self.perf_variables.pop('allreduce_latency_us', None)

    def case_settings(self):
        ops = ('' if len(self.operations) == len(OPERATIONS)
               else ' ' + ','.join(self.operations))
        return [f'{self.min_bytes}-{self.max_bytes}{ops}', self.precision]

    def program_args(self):
        args = ['-b', self.min_bytes, '-e', self.max_bytes,
                '-f', self.step_factor, '-n', self.steps,
                '-w', self.warmup_iters, '--ops', ','.join(self.operations),
                '--precision', self.precision]
        if not self.uses_gpus:
            args.append('--cpu')
        return [str(a) for a in args]

    def component_problems(self, log):
        '''Every operation's table is in the log, and no element was
        wrong.'''
        problems = []
        for op in self.operations:
            name = OPERATIONS[op]
            wrong = log.figures.get(f'{name}_wrong')
            if f'{name}_busbw_GBps' not in log.figures:
                problems.append(f'no {op} table in the log')
            elif wrong:
                problems.append(f'{op}: {wrong} wrong elements')
        return problems

    @performance_function('GB/s')
    def allreduce_busbw_GBps(self):
        '''All-reduce's bus bandwidth at the largest size: algbw x
        2(n-1)/n.'''
        return self.metric('allreduce_busbw_GBps')

    @performance_function('GB/s')
    def allgather_busbw_GBps(self):
        '''All-gather's bus bandwidth at the largest size: algbw x
        (n-1)/n.'''
        return self.metric('allgather_busbw_GBps')

    @performance_function('GB/s')
    def reducescatter_busbw_GBps(self):
        '''Reduce-scatter's bus bandwidth at the largest size: algbw x
        (n-1)/n.'''
        return self.metric('reducescatter_busbw_GBps')

    @performance_function('us')
    def allreduce_latency_us(self):
        '''The time of one all-reduce of the smallest size.'''
        return self.metric('allreduce_latency_us')


WORKLOAD = Workload(
    name='collectives', check='Collectives', program='collectives',
    parser=parser, kind='component',
    explains='network',
    headline=Headline('allreduce_busbw_GBps'),
    data="buffers on each rank's device",
    names_note='nccl-tests names its programs <op>_perf; the parser is '
               "nccl_tests (it reads nccl-tests' format), beside nccl, "
               "which reads NCCL's own INFO log",
    precisions=precisions.PROGRAM)
