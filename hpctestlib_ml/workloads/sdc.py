"""The same answer on every rank, or the rank that computed wrongly
named: the check of the component benchmark ``sdc`` (its sizes and what
it computes: :mod:`hpctestlib_ml.registry.sdc`; how the answers are
judged: :mod:`hpctestlib_ml.answers`).

Every rank of every node computes at once; a rank whose answer differs
from the right one fails the case in one line, its category
``hardware``: ``hardware: silent data corruption: rank 1 on n2 (cpu
x86_64 AVX512, 1 thread): matmul fp32 #2 (1 of 65536 elements, max
relative error 1.2e-04) differs from the known-good digest of this stack
(5 passing runs); bit-identical elsewhere``. The right answer is the
known-good digest of the software stack in the references file (``hpcml
references --write`` keeps the digest of passing runs), else the
majority's (three ranks or more); with neither, the ranks that disagree
are named as suspects. ``--distribute=all`` runs it on every node of a
partition, each against the known-good digest.
"""
import reframe.utility.typecheck as typ
from reframe.core.builtins import performance_function, variable

from hpctestlib_ml.base import ComponentTest
from hpctestlib_ml.workloads.matmul_rate import DEVICE_PRECISIONS


class SilentDataCorruptionBenchmark(ComponentTest):
    '''The same matrix products and training step on every rank, from one
    seed, deterministically; the ranks' digests compared with each other
    and with the known-good digest of the software stack.

    .. list-table:: Summary (beside ComponentTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``matrix_size``, ``products``, ``model_width``,
           ``model_batch``, ``precisions``; ``steps`` are the repetitions
           (every rank computes it all that many times)
       * - Metrics
         - ``answer_s`` (s: the slowest rank's, over its repetitions)
       * - Partition extras
         - none
    '''

    workload = 'sdc'

    #: Side of the square matrices.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 8192, ``tiny`` 256)
    matrix_size = variable(str, int, type(None), value=None)

    #: Matrix products per precision, each from its own seed.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 3, ``tiny`` 2)
    products = variable(str, int, type(None), value=None)

    #: Width of the perceptron whose training step every rank takes.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 2048, ``tiny`` 64)
    model_width = variable(str, int, type(None), value=None)

    #: Samples of its training step.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 512, ``tiny`` 16)
    model_batch = variable(str, int, type(None), value=None)

    #: Precisions to compute in, of ``bf16``, ``fp16``, ``tf32``,
    #: ``fp32``.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]`` (bf16, fp16, tf32, fp32 on GPUs; fp32 on CPUs)
    precisions = variable(typ.List[str], value=[])

    def finalize_settings(self):
        self.precisions = list(self.precisions or
                               DEVICE_PRECISIONS[self.device])

    def case_settings(self):
        '''What the answer depends on: the sizes, the precisions and, on
        CPUs, the threads each rank computes with.'''
        found = [f'n={self.matrix_size}', f'products={self.products}',
                 f'model={self.model_width}x{self.model_batch}',
                 f'precisions={",".join(self.precisions)}']
        if not self.uses_gpus and self.rank_threads:
            found.append(f'threads={self.rank_threads}')
        return found

    def program_args(self):
        args = ['--matrix-size', self.matrix_size,
                '--products', self.products,
                '--width', self.model_width, '--batch', self.model_batch,
                '--precisions', ','.join(self.precisions),
                '--repetitions', self.steps]
        if not self.uses_gpus:
            args.append('--cpu')
            if self.rank_threads:
                args += ['--threads', self.rank_threads]
        return [str(a) for a in args]

    def component_problems(self, log):
        '''A rank whose answer was wrong, or answers that cannot be
        compared
        (:meth:`~hpctestlib_ml.plugins.answers.Answers.answer_problems`).'''
        return self.answer_problems()

    @performance_function('s')
    def answer_s(self):
        '''What the check costs: the slowest rank's seconds over its
        repetitions (computation, digests and comparisons; not the start
        of Python and torch).'''
        return self.metric('answer_s')
