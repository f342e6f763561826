"""GPT pretraining with Megatron: the CARAML LLM benchmark, declared.

The check (:mod:`hpctestlib_ml.workloads.megatron`) runs Megatron-LM's
``pretrain_gpt.py`` where a checkout is configured, else
``src/gpt_pretrain``, which trains Megatron-Core's GPTModel with the same
arguments and log line. The models, their shapes, layouts, arguments and
FLOPs: :mod:`.models`; what Megatron-Core builds of them (``hpcml
model-info``): :mod:`.builder`; CARAML's run as data (its arguments,
precisions and global batches): :mod:`.caraml`; the analytic memory
estimate: :mod:`.memory`. Here: the workload's declaration, the benchmark
precision and default global batch of a model size, and the memory
estimate of a case with CARAML's options.
"""
from hpctestlib_ml import memory_estimate, precisions, settings
from hpctestlib_ml.parsers import megatron as parser
from hpctestlib_ml.registry import Headline, Workload
from hpctestlib_ml.registry.megatron import caraml, memory
from hpctestlib_ml.registry.megatron.builder import build_model_info
from hpctestlib_ml.registry.megatron.models import (MODELS, PUBLISHED,
                                                    padded_vocab)

#: Iterations at benchmark and short size (``-S steps=`` changes them).
BENCHMARK_ITERATIONS = 20


def default_global_batch(size, micro_batch, data_parallel):
    '''The global batch a case of model *size* runs by default: CARAML's,
    else the size's ``global_batch`` (Llama 3: CSCS's; GPT-J: its own),
    else 8 (``tiny``), rounded to a multiple of micro batch x data
    parallel (one at least).'''
    target = (caraml.global_batch(size, micro_batch, data_parallel) or
              MODELS[size].get('global_batch', 8))
    per_step = micro_batch * data_parallel
    return per_step * max(1, round(target / per_step))


def benchmark_precision(size):
    '''The precision model *size* trains in at benchmark size on GPUs:
    CARAML's (fp16 for 800M and 13B, bf16 for 175B), else bf16.'''
    return caraml.PRECISION.get(size, 'bf16')


def estimate_memory(shape, vocab, tp, pp, dp, micro_batch, global_batch,
                    precision, on_gpu=True, **kwargs):
    '''Per-device memory of the first pipeline stage
    (:func:`hpctestlib_ml.registry.megatron.memory.megatron_estimate`) with
    the options CARAML's arguments turn on, in Megatron-LM and the fallback
    alike: sequence parallelism (at TP > 1), selective recomputation, the
    distributed optimizer; the attention's s x s tensors are kept only by
    the CPU's math path, and then recomputed. On CPUs, with what a CPU
    process holds beyond its tensors
    (:func:`hpctestlib_ml.memory_estimate.on_cpu`).'''
    estimate = memory.megatron_estimate(
        shape, vocab, tp, pp, dp, micro_batch, global_batch, precision,
        sequence_parallel=tp > 1 and '--sequence-parallel' in caraml.TRAINING,
        recompute_granularity=('selective' if '--recompute-activations'
                               in caraml.TRAINING else None),
        distributed_optimizer='--use-distributed-optimizer' in
        caraml.OPTIMIZER,
        attention_scores_stored=not on_gpu, **kwargs)
    return estimate if on_gpu else memory_estimate.on_cpu(estimate)


def build_memory_info(size, layout=None, batch=None, precision=None):
    '''(ModelInfo, MemoryEstimate per device) at *size*, analytic
    (:func:`estimate_memory`): *layout* (tp, pp, dp) default the size's TP
    and PP and DP 1, with CARAML's options (on a GPU); precision: the
    check's (fp32 at tiny, as on CPUs, else the size's).'''
    info = build_model_info(size, None)
    shape = MODELS[info.model]
    tp, pp, dp = layout or (shape['tp'], shape['pp'], 1)
    batch = batch or shape['micro_batch']
    precision = precision or ('fp32' if info.model == 'tiny' else
                              benchmark_precision(info.model))
    vocab = padded_vocab(shape['vocab'], tp)
    global_batch = default_global_batch(info.model, batch, dp)
    return info, estimate_memory(shape, vocab, tp, pp, dp, batch,
                                 global_batch, precision)


WORKLOAD = Workload(
    name='megatron', check='MegatronGPT', program='gpt_pretrain',
    parser=parser, headline=Headline('tokens_per_second'),
    sizes={
        'tiny': {'batch_size': MODELS['tiny']['micro_batch'],
                 'time_limit': '15m'},
        # Precision: the model size's (benchmark_precision, added by the
        # check's size_table).
        'benchmark': {'steps': BENCHMARK_ITERATIONS, 'time_limit': '1h'},
        # An iteration is a whole global batch: 20 of them are the
        # benchmark's measurement already.
        'short': {'steps': BENCHMARK_ITERATIONS},
    },
    # A sample is a token here: the throughput metric counts tokens.
    throughput_metric='tokens_per_second',
    model_info=build_model_info, memory_info=build_memory_info,
    published=PUBLISHED, models=tuple(MODELS),
    # CARAML's --optimizer adam (Megatron-LM's default); the memory
    # estimate is memory_info's, this is the checkpoint's state.
    optimizer='adam',
    data="Megatron's mock data (or a site's indexed dataset)",
    names_note='gpt_pretrain runs Megatron-LM\'s pretrain_gpt.py, or '
               'Megatron-Core where no checkout is configured',
    packages=('megatron-core',), precisions=precisions.PROGRAM,
    variables=settings.variables('megatron', [
        ('global_batch_size', 'int', None, "samples per iteration over all "
         "ranks; default: CARAML's", {'minimum': 1}),
        ('tensor_parallel', 'int', None, "tensor parallel size; default: "
         "the model size's", {'minimum': 1}),
        ('pipeline_parallel', 'int', None, "pipeline parallel size; "
         "default: the model size's", {'minimum': 1}),
        ('megatron_lm', 'path', None, "a Megatron-LM checkout whose "
         "pretrain_gpt.py runs; default: extras['megatron_lm'], else "
         "Megatron-Core's model", {'allowed': 'an absolute directory'}),
        ('position_embedding_type', 'str', 'rope', 'position embeddings',
         {'choices': ('rope', 'learned_absolute')}),
        ('untie_embeddings', 'bool', False, 'a separate output layer'),
        ('data_path', 'path', None, "a Megatron indexed dataset (path "
         "prefix); default: extras['megatron_data'], else mock data",
         {'allowed': 'an absolute path prefix'}),
    ]),
    extras=settings.extras_keys('megatron', [
        ('megatron_lm', 'path', None, 'a Megatron-LM checkout',
         {'allowed': 'a directory'}),
        ('megatron_data', 'dict', None, 'an indexed dataset: data_path, '
         'vocab_file, merge_file', {'allowed': 'a mapping'}),
    ]),
    # Its layout and data, derived at setup from its settings.
    derived=('data_parallel', 'model_shape', 'vocab', 'dataset',
             'input_sources'))
