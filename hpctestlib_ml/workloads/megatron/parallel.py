"""The parallel layout of a Megatron case: tensor, pipeline and data
parallel sizes, the global batch, the vocabulary padded for the tensor
parallel size, and the memory per device that layout needs. A plugin of
:class:`~hpctestlib_ml.workloads.megatron.MegatronGPTTraining`, beside the
pure decisions it adapts (:func:`parallel_layout`, :func:`model_fits`)."""
from reframe.core.builtins import variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml.errors import BadInputError, positive_int
from hpctestlib_ml.layout import LayoutError, resolve_layout
from hpctestlib_ml.registry.megatron import (default_global_batch,
                                             estimate_memory)
from hpctestlib_ml.registry.megatron.models import MODELS, padded_vocab


def data_parallel_size(world, tp, pp):
    '''World size / (TP x PP); ValueError naming the fix if it does not divide.'''
    if world % (tp * pp):
        raise ValueError(f'{world} GPUs do not split into tensor parallel {tp}'
                         f' x pipeline parallel {pp} groups: use a multiple '
                         f'of {tp * pp} GPUs (-S num_nodes) or change '
                         f'-S tensor_parallel/-S pipeline_parallel')
    return world // (tp * pp)


def model_fits(model_size, size, scale, facts, num_nodes=None):
    '''Whether a case of *model_size* at *size* (``tiny`` only for the
    ``tiny`` model, the others not at ``tiny``) runs *scale* on a partition
    of *facts*: its ranks split into the model's TP x PP groups. With
    ``-S num_nodes`` set, setup checks the layout and says why it fails.'''
    if (model_size == 'tiny') != (size == 'tiny'):
        return False
    if num_nodes is not None:
        return True
    model = MODELS[model_size]
    try:
        layout = resolve_layout(scale, facts)
        data_parallel_size(layout.world_size, model['tp'], model['pp'])
    except (LayoutError, ValueError):
        return False
    return True


def parallel_layout(model_size, world, micro_batch, tensor_parallel=None,
                    pipeline_parallel=None, global_batch=None):
    '''(TP, PP, data parallel, global batch) of *model_size* on *world*
    ranks: the model's TP and PP unless set, the default global batch
    (:func:`~hpctestlib_ml.registry.megatron.default_global_batch`) unless
    set; a
    :class:`~hpctestlib_ml.errors.BadInputError` naming the fix where they do
    not fit.'''
    model = MODELS[model_size]
    tp = positive_int('tensor_parallel', tensor_parallel or model['tp'])
    pp = positive_int('pipeline_parallel', pipeline_parallel or model['pp'])
    try:
        dp = data_parallel_size(world, tp, pp)
    except ValueError as err:
        raise BadInputError(str(err)) from None
    if global_batch is None:
        global_batch = default_global_batch(model_size, micro_batch, dp)
    global_batch = positive_int('global_batch_size', global_batch)
    if global_batch % (micro_batch * dp):
        raise BadInputError(
            f'global batch {global_batch} is not a multiple of micro batch '
            f'{micro_batch} x data parallel {dp}: fix -S global_batch_size')
    return tp, pp, dp, global_batch


class ParallelLayout(RegressionTestPlugin):
    '''How a Megatron case splits its model and batch over its ranks.'''

    #: Samples per iteration over all ranks; default: CARAML's
    #: (:func:`hpctestlib_ml.registry.megatron.caraml.global_batch`: 32 for 800M, data
    #: parallel x micro batch x 64 for 13B and 175B), CSCS's for Llama 3
    #: (128 and 1024), GPT-J's own for gptj-6B (512), 8 for ``tiny``,
    #: rounded to a multiple of micro batch x data-parallel size. CARAML
    #: sweeps 800M's from 16 to 4096 (its JEDI row: 2048).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (see above)
    global_batch_size = variable(str, int, type(None), value=None)

    #: Tensor parallel size (``--tensor-model-parallel-size``); at setup
    #: the case's.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the model size's)
    tensor_parallel = variable(str, int, type(None), value=None)

    #: Pipeline parallel size (``--pipeline-model-parallel-size``); at
    #: setup the case's.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the model size's)
    pipeline_parallel = variable(str, int, type(None), value=None)

    #: Data parallel size: the ranks / (tensor x pipeline parallel), set
    #: at setup.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    data_parallel = variable(int, type(None), value=None)

    #: The model size's shape (its entry of
    #: :data:`~hpctestlib_ml.registry.megatron.models.MODELS`), set at setup.
    #:
    #: :type: :class:`dict`
    #: :default: ``{}``
    model_shape = variable(dict, value={})

    #: The vocabulary the model is built with: the tokenizer's, padded to
    #: a multiple of 128 x tensor parallel as Megatron-LM pads it, set at
    #: setup.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    vocab = variable(int, type(None), value=None)

    def resolve_parallel_layout(self, model_size, world_size, micro_batch):
        '''The variables above for *model_size* on *world_size* ranks at
        *micro_batch* (:func:`parallel_layout`).'''
        self.model_shape = MODELS[model_size]
        (self.tensor_parallel, self.pipeline_parallel, self.data_parallel,
         self.global_batch_size) = parallel_layout(
            model_size, world_size, micro_batch, self.tensor_parallel,
            self.pipeline_parallel, self.global_batch_size)
        self.vocab = padded_vocab(self.model_shape['vocab'],
                                  self.tensor_parallel)

    def reference_case_options(self):
        '''The global batch and the layout (another case of each).'''
        return {'global_batch_size': self.global_batch_size,
                'tp': self.tensor_parallel, 'pp': self.pipeline_parallel}

    def memory_estimate(self):
        '''Per-device memory of the first pipeline stage, as this case
        runs (:func:`~hpctestlib_ml.registry.megatron.estimate_memory`).'''
        return estimate_memory(
            self.model_shape, self.vocab, self.tensor_parallel,
            self.pipeline_parallel, self.data_parallel, self.batch_size,
            self.global_batch_size, self.precision, on_gpu=self.uses_gpus,
            untie=True if self.untie_embeddings else None,
            learned_positions=(self.position_embedding_type ==
                               'learned_absolute'))

    def memory_fit_hints(self, estimate, device_gib):
        '''A smaller micro batch where one fits; more nodes (the
        distributed optimizer shards its state over data parallel); larger
        TP or PP.'''
        hints = super().memory_fit_hints(estimate, device_gib)
        hints.append('more nodes (-S num_nodes=): the distributed '
                     'optimizer shards its state over data parallel '
                     f'{self.data_parallel}')
        hints.append(f'more model parallelism (-S tensor_parallel=, -S '
                     f'pipeline_parallel=; now {self.tensor_parallel} and '
                     f'{self.pipeline_parallel})')
        return hints
