"""All-reduce, all-gather and reduce-scatter as nccl-tests measures them:
the check of the component benchmark ``collectives``. The component (its
sizes, parser, headline, and what its figures mean):
:mod:`hpctestlib_ml.registry.collectives`."""
from reframe.core.builtins import performance_function, variable
import reframe.utility.typecheck as typ

from hpctestlib_ml.base import ComponentTest
from hpctestlib_ml.parsers import nccl_tests as parser

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
