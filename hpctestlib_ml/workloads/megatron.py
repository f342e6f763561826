"""GPT pretraining with Megatron: the CARAML LLM benchmark.

On GPU partitions the check runs Megatron-LM's ``pretrain_gpt.py`` (path
from ``-S megatron_lm=`` or the partition's ``extras['megatron_lm']``) at
the CARAML model sizes; elsewhere (and where Megatron-LM is absent)
``src/gpt_pretrain`` trains Megatron-Core's GPTModel with the same
arguments and log line. The model size is a parameter: ``tiny`` runs where
the size resolves to ``tiny`` (CPU partitions, ``--mode smoke``), the CARAML
sizes where it resolves to ``benchmark``.

CARAML (Jülich's "Comparison of AI accelerators" suite): GPT models with
sequence length 2048 and the GPT-2 tokenizer; data are a 790-sample OSCAR
subset as a Megatron indexed dataset (``extras['megatron_data']``), else
Megatron's mock data.

The model is Megatron-LM's GPT with CARAML's arguments
(FZJ-JSC/CARAML ``llm_training/llm_benchmark_nvidia_amd.yaml``, NVIDIA
systems): ``--position-embedding-type rope`` and otherwise Megatron-LM's
defaults (``megatron/training/arguments.py``): output layer tied to the word
embeddings, biases on, LayerNorm, GeLU MLP of 4h. Parameters of the whole
model (all tensor-parallel ranks), with the vocabulary padded for the
size's TP: 800M 908,759,040 at TP 1 (912,953,344 with Megatron-LM's default
learned absolute position embeddings, which add a 2048 x 2048 table), 13B
12,843,796,480 at TP 2, 175B 174,590,681,088 at TP 8 (``hpcml model-info
megatron --size 13B``).

How it runs: CARAML's whole argument set per size
(:mod:`hpctestlib_ml.caraml`, compared with CARAML's YAML by
``tests/test_caraml_args.py``): fp16 for 800M and 13B, bf16 for 175B, with
CARAML's loss scaler, Adam and cosine schedule in samples, sequence
parallelism, selective recomputation, the distributed optimizer and flash
attention, ``CUDA_DEVICE_MAX_CONNECTIONS=1``. The Megatron-Core fallback
runs the same as far as Megatron-Core goes and says where it cannot
(perflog field ``departures``).

Vocabulary padding: Megatron-LM pads the tokenizer's vocabulary to a
multiple of ``make_vocab_size_divisible_by`` (128) x TP, so every tensor-
parallel rank holds an equal, aligned slice: 50257 -> 50304 at TP 1, 50432
at TP 2, 50688 at TP 4 and 51200 at TP 8. The padded rows are parameters
and FLOPs like any others (Megatron's own FLOPs formula uses the padded
size, as :func:`~hpctestlib_ml.flops.megatron_gpt_flops_per_token` here).

Llama 3 8B and 70B (``llama3-8B``, ``llama3-70B``; benchmark size only,
like the CARAML sizes): Meta's architecture (Grattafiori et al. 2024, "The
Llama 3 Herd of Models", table 3) in Megatron-LM's arguments: RMSNorm (eps
1e-5), SwiGLU MLP (ffn 14336 / 28672), no biases in linear layers,
grouped-query attention with 8 query groups (32 / 64 heads, hidden 4096 /
8192, 32 / 80 layers), RoPE with base 500,000, output layer untied,
sequence 8192, Llama 3's 128,256-token vocabulary (mock data and
``--tokenizer-type NullTokenizer --vocab-size 128256``: the sites'
indexed datasets are GPT-2 BPE). Llama 3, not 3.1: no RoPE scaling
(``--use-rope-scaling``, which CSCS's check passes, changes the
frequencies only, neither parameters nor FLOPs). Parameters at TP 1:
8,030,261,248 and 70,553,706,496, Meta's counts. Vocabulary padding:
128256 is a multiple of 128 x 2, so it stays 128256 at TP 1 and 2 (8B's
layout: TP 1); it becomes 128512 at TP 4 (70B's layout: 4,194,304 more
parameters, 70,557,900,800 in all) and 129024 at TP 8.

The layout is CSCS's (eth-cscs/cscs-reframe-tests
``checks/apps/pytorch/pytorch_megatronlm.py`` at
2f813557625e1294b277a698338f82f398bea7b8, GH200 nodes of 4 GPUs): 8B on
16 nodes, TP 1, PP 1, micro batch 1, global batch 128 (data parallel 64);
70B on 32 nodes, TP 4 (its TP ``None``: the GPUs of a node), PP 8, micro
batch 1, global batch 1024 (data parallel 4). Nodes are not part of the
model: ``-S num_nodes=16`` / ``32`` selects them. They run with CARAML's
training arguments (below; sequence parallelism, selective recomputation,
the distributed optimizer, flash attention) at bf16. Where this departs
from CSCS: its 70B runs an interleaved pipeline (5 layers per virtual
stage, i.e. 2 virtual stages per rank), which neither the suite's command
nor the fallback has (a plain 1F1B pipeline: the non-interleaved bubble);
context parallel is 1 in both. CSCS also tokenises with the Swiss AI
tokenizer, not Llama 3's.

GPT-J 6B (``gptj-6B``; benchmark size only, like Llama 3): EleutherAI's
model (kingoflolz/mesh-transformer-jax, ``configs/6B_roto_256.json`` and
``mesh_transformer/layers.py``; transformers' ``modeling_gptj``): 28
layers, hidden 4096, 16 heads of 256, an FFN of 16384 with biases and
GeLU, rotary embeddings on the first 64 dimensions of each head, pairs of
neighbouring dimensions rotated (``rotate_every_two``), no biases on the
query, key, value and output projections, one LayerNorm per layer feeding
attention and MLP in parallel (x + attn(ln(x)) + mlp(ln(x))), an untied
output layer with a bias, vocabulary 50,400 (GPT-2's 50,257 BPE tokens
padded for 8 shards), sequence 2048, no dropout.

Megatron-Core 0.16.1 expresses the rotary part exactly (``--rotary-percent
0.25 --rotary-interleaved``: 64 of 256 dimensions, neighbouring pairs) but
not the layer; what it builds instead, the same in Megatron-LM and in the
fallback, is logged with every result (perflog ``departures``,
:data:`GPTJ_DEPARTURES`, :func:`model_departures`):

- its ``TransformerLayer`` has only the sequential residual: attention,
  then the MLP, each behind its own LayerNorm (28 x 8,192 parameters
  more); the matrix products, and so the FLOPs, are GPT-J's;
- ``add_bias_linear`` is one switch for every linear layer: kept on (GPT-J's
  MLP has biases), it puts biases on QKV and the attention output too
  (28 x 16,384 more);
- GPTModel's output layer has no bias (50,400 fewer);
- the vocabulary is padded as Megatron-LM pads it: 50,432 at TP 1 and 2
  (2 x 32 x 4,096 more, embedding and output layer);
- GeLU is exact (``F.gelu``, Megatron-LM's for Megatron-Core models; its
  ``--openai-gelu`` reaches only the legacy model), GPT-J's the tanh
  approximation: no parameter or FLOP changes.

Parameters: the fallback builds 6,051,782,656 at TP 1 (``hpcml model-info
megatron --size gptj-6B``). GPT-J's own counts: 6,050,882,784, transformers'
``GPTJForCausalLM`` from a default ``GPTJConfig`` (the checkpoint as
published on the Hugging Face Hub); this build is 899,872 more, the sum of
the departures above (229,376 + 458,752 - 50,400 + 262,144). The model
card's 6,053,381,344 (mesh-transformer-jax README) counts the JAX model's
parameters over its 8 model-parallel shards (``tree_size`` of the sharded
state): 7 extra copies of the replicated LayerNorms (29 x 8,192 each) and
of the MLP output bias (28 x 4,096 each: every shard adds its own before
the all-reduce), and the embedding's bias (8 x 4,096; a one-hot ``Linear``
there), which ``to_hf_weights.py`` sums over the shards and folds into the
word embeddings: 1,662,976 + 802,816 + 32,768 = 2,498,560 more than
transformers'.

Layout: TP 1, PP 1 (as CSCS runs the larger Llama 3 8B; GPT-J's own 8-way
model parallelism, ``cores_per_replica`` 8, served TPU v3 cores of 16 GB:
``-S tensor_parallel=8`` runs it so), micro batch 1 and global batch 512,
GPT-J's own (``per_replica_batch`` 1 x 16 gradient accumulation steps x 32
replicas on a TPU v3-256: 1M tokens a step), bf16. Mock data only, with its
50,400-token vocabulary (the sites' indexed datasets are tokenised for
GPT-2's 50,257, which Megatron-LM would pad to 50,304). With Megatron-LM
itself, a checkout from February 2024 on: ``--rotary-interleaved`` came
then (NVIDIA/Megatron-LM 260c4f2; CARAML's pin, f772743 of October 2023,
has none); ``--no-rope-fusion`` goes with it, since the fused RoPE takes
interleaved pairs only with Transformer Engine 2.3 or newer.
"""

from reframe.core.builtins import (parameter, performance_function,
                                   run_after, run_before, variable)

from hpctestlib_ml import (caraml, flops, inputs, memory_estimate,
                           model_info, precisions)
from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.errors import BadInputError, positive_int
from hpctestlib_ml.plugins.placement import partition_facts
from hpctestlib_ml.layout import LayoutError, resolve_layout
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.parsers import megatron as parser
from hpctestlib_ml.workloads import Headline, Workload
from hpctestlib_ml.sizes import default_size

#: GPT-2 BPE vocabulary; Megatron pads it to a multiple of 128 x TP (50304).
GPT2_VOCAB = 50257

#: Llama 3's tokenizer (tiktoken BPE, 128,000 + 256 special tokens): a
#: multiple of 128 and of 256, so Megatron pads it only from TP 4 on.
LLAMA3_VOCAB = 128256

#: The Llama 3 architecture in Megatron-LM's terms (its
#: ``megatron/training/arguments.py``): RMSNorm (eps 1e-5), a SwiGLU MLP,
#: no biases in the linear layers, RoPE with base 500,000 (Llama 3; 3.1's
#: ``--use-rope-scaling`` is not modelled), a separate output layer, no
#: dropout (as Meta and CSCS train it; Megatron-LM's default is 0.1).
LLAMA3 = {'normalization': 'RMSNorm', 'norm_epsilon': 1e-5, 'swiglu': True,
          'disable_bias_linear': True, 'rotary_base': 500000,
          'untie_embeddings': True, 'dropout': 0.0, 'vocab': LLAMA3_VOCAB}

#: GPT-J's embedding rows: GPT-2's 50,257 BPE tokens padded to a multiple
#: of its 8 model-parallel shards (mesh-transformer-jax ``n_vocab``).
GPTJ_VOCAB = 50400

#: GPT-J 6B in Megatron-LM's terms: 64 of each head's 256 dimensions
#: rotated, neighbouring pairs (``rotate_every_two``), a separate output
#: layer, no dropout (GPT-J trained without; transformers' ``GPTJConfig``
#: defaults to 0.0); its FFN of 4h with biases and GeLU is Megatron-LM's.
GPTJ = {'rotary_percent': 0.25, 'rotary_interleaved': True,
        'untie_embeddings': True, 'dropout': 0.0, 'vocab': GPTJ_VOCAB}

#: GPT-J 6B's published parameter counts, neither of which Megatron-Core
#: builds (the module docstring): (count, whose and what it counts).
GPTJ_PUBLISHED_PARAMS = (
    (6_050_882_784, "transformers' GPTJForCausalLM from a default GPTJConfig "
                    "(the Hub's checkpoint)"),
    (6_053_381_344, "GPT-J's model card (mesh-transformer-jax): its 8 "
                    "shards' parameters, with 7 more copies of every "
                    "LayerNorm and MLP output bias, and the embedding's "
                    "bias"),
)

#: Where the model Megatron-Core builds for ``gptj-6B`` departs from GPT-J
#: (the module docstring; the vocabulary's padding is added by
#: :func:`model_departures`), as the perflog's ``departures`` and ``hpcml
#: model-info`` say it.
GPTJ_DEPARTURES = (
    'GPT-J layer as attention then MLP, each behind its own LayerNorm '
    '(GPT-J: both from one LayerNorm, in parallel; Megatron-Core has no '
    'parallel residual)',
    'biases on QKV and the attention output (GPT-J: none; '
    'add_bias_linear is one switch, kept for its MLP biases)',
    'no output-layer bias (GPTModel builds none)',
    'exact GeLU (GPT-J: tanh approximation)',
)

#: Model sizes: shape, vocabulary (before padding), parallelism (TP, PP)
#: and micro batch per GPU; ``global_batch``: the default global batch
#: where CARAML has none (:func:`hpctestlib_ml.caraml.global_batch`). The
#: CARAML sizes are its benchmark's; ``tiny`` is the suite's CPU stand-in;
#: the Llama 3 sizes and their layout and batch are CSCS's, GPT-J's batch
#: its own (see the module docstring), trained with CARAML's other
#: arguments (bf16); ``departures`` and ``published_params``: where the
#: model built departs from the published one, and the published counts.
MODELS = {
    'tiny': {'num_layers': 2, 'hidden_size': 256, 'num_attention_heads': 4,
             'seq_length': 128, 'vocab': GPT2_VOCAB, 'tp': 1, 'pp': 1,
             'micro_batch': 4},
    '800M': {'num_layers': 16, 'hidden_size': 2048, 'num_attention_heads': 8,
             'seq_length': 2048, 'vocab': GPT2_VOCAB, 'tp': 1, 'pp': 1,
             'micro_batch': 4},
    '13B': {'num_layers': 40, 'hidden_size': 5120, 'num_attention_heads': 32,
            'ffn_hidden_size': 20480,
            'seq_length': 2048, 'vocab': GPT2_VOCAB, 'tp': 2, 'pp': 2,
            'micro_batch': 2},
    '175B': {'num_layers': 96, 'hidden_size': 12288, 'num_attention_heads': 96,
             'seq_length': 2048, 'vocab': GPT2_VOCAB, 'tp': 8, 'pp': 8,
             'micro_batch': 2},
    'llama3-8B': {'num_layers': 32, 'hidden_size': 4096,
                  'num_attention_heads': 32, 'num_query_groups': 8,
                  'ffn_hidden_size': 14336, 'seq_length': 8192, **LLAMA3,
                  'tp': 1, 'pp': 1, 'micro_batch': 1, 'global_batch': 128},
    'llama3-70B': {'num_layers': 80, 'hidden_size': 8192,
                   'num_attention_heads': 64, 'num_query_groups': 8,
                   'ffn_hidden_size': 28672, 'seq_length': 8192, **LLAMA3,
                   'tp': 4, 'pp': 8, 'micro_batch': 1, 'global_batch': 1024},
    'gptj-6B': {'num_layers': 28, 'hidden_size': 4096,
                'num_attention_heads': 16, 'ffn_hidden_size': 16384,
                'seq_length': 2048, **GPTJ, 'tp': 1, 'pp': 1,
                'micro_batch': 1, 'global_batch': 512,
                'departures': GPTJ_DEPARTURES,
                'published_params': GPTJ_PUBLISHED_PARAMS},
}

#: Iterations at benchmark and short size (``-S steps=`` changes them).
BENCHMARK_ITERATIONS = 20

#: The jubench LLM metric: seconds to train this many tokens.
JUBENCH_TOKENS = 20_000_000


#: CARAML's position embeddings (``--position-embedding-type rope`` on
#: NVIDIA systems; the ROCm fork's name for it is ``rotary``).
CARAML_POSITION_EMBEDDING = 'rope'


def model_arguments(shape, position_embedding_type=CARAML_POSITION_EMBEDDING,
                    untie_embeddings=False):
    '''The ``pretrain_gpt.py`` arguments that define the model of *shape*
    (an entry of :data:`MODELS`), as strings; both programs (Megatron-LM and
    the Megatron-Core fallback) build the same model from them.'''
    args = ['--num-layers', shape['num_layers'],
            '--hidden-size', shape['hidden_size'],
            '--num-attention-heads', shape['num_attention_heads'],
            '--seq-length', shape['seq_length'],
            '--max-position-embeddings', shape['seq_length'],
            '--position-embedding-type', position_embedding_type]
    # 13B's --ffn-hidden-size (CARAML's modelargs, 4h), and Llama 3's and
    # GPT-J's architecture (absent from the GPT sizes, whose arguments
    # stay Megatron-LM's defaults).
    if shape.get('ffn_hidden_size'):
        args += ['--ffn-hidden-size', shape['ffn_hidden_size']]
    if shape.get('num_query_groups'):
        args += ['--group-query-attention',
                 '--num-query-groups', shape['num_query_groups']]
    if shape.get('normalization'):
        args += ['--normalization', shape['normalization'],
                 '--norm-epsilon', shape['norm_epsilon']]
    if shape.get('swiglu'):
        args.append('--swiglu')
    if shape.get('disable_bias_linear'):
        args.append('--disable-bias-linear')
    if shape.get('rotary_base'):
        args += ['--rotary-base', shape['rotary_base']]
    if shape.get('rotary_percent'):
        args += ['--rotary-percent', shape['rotary_percent']]
    if shape.get('rotary_interleaved'):
        # Megatron-LM fuses RoPE by default, and its TransformerConfig
        # refuses interleaved pairs with the fused kernel unless
        # Transformer Engine is 2.3 or newer (ValueError at start-up).
        args += ['--rotary-interleaved', '--no-rope-fusion']
    if shape.get('dropout') is not None:
        args += ['--attention-dropout', shape['dropout'],
                 '--hidden-dropout', shape['dropout']]
    if untie_embeddings or shape.get('untie_embeddings'):
        args.append('--untie-embeddings-and-output-weights')
    return [str(a) for a in args]


def pretrain_arguments(shape, tp, pp, micro_batch, global_batch, iterations,
                       precision, data=None,
                       position_embedding_type=CARAML_POSITION_EMBEDDING,
                       untie_embeddings=False):
    '''``pretrain_gpt.py``'s arguments, as strings: CARAML's per size
    (:mod:`hpctestlib_ml.caraml`) with *shape*, the layout, the batch,
    *iterations* of it, *precision* and *data* (``data_path``,
    ``vocab_file``, ``merge_file``; mock data without ``data_path``).'''
    data = data or {}
    args = ['--tensor-model-parallel-size', tp,
            '--pipeline-model-parallel-size', pp]
    args += model_arguments(shape, position_embedding_type, untie_embeddings)
    args += ['--micro-batch-size', micro_batch,
             '--global-batch-size', global_batch,
             '--train-samples', iterations * global_batch]
    if data.get('data_path'):
        args += ['--vocab-file', data.get('vocab_file', ''),
                 '--merge-file', data.get('merge_file', ''),
                 '--tokenizer-type', 'GPT2BPETokenizer',
                 '--data-path', data['data_path']]
    else:
        args += ['--mock-data', '--tokenizer-type', 'NullTokenizer',
                 '--vocab-size', shape['vocab']]
    args += caraml.arguments(precision)
    args += caraml.OUTPUT + ['--log-throughput']
    return [str(a) for a in args]


def flops_per_token(shape, vocab):
    '''Training FLOPs per token of *shape* with the padded *vocab*:
    :func:`~hpctestlib_ml.flops.megatron_gpt_flops_per_token` with its
    MLP width, query groups and SwiGLU (Megatron-LM's defaults: 4h,
    multi-head, GeLU).'''
    return flops.megatron_gpt_flops_per_token(
        shape['num_layers'], shape['hidden_size'], shape['seq_length'],
        vocab, ffn_hidden=shape.get('ffn_hidden_size'),
        query_groups_ratio=(shape.get('num_query_groups') or
                            shape['num_attention_heads']) /
        shape['num_attention_heads'],
        swiglu=shape.get('swiglu', False))


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
    (:func:`hpctestlib_ml.memory_estimate.megatron_estimate`) with the
    options CARAML's arguments turn on, in Megatron-LM and the fallback
    alike: sequence parallelism (at TP > 1), selective recomputation, the
    distributed optimizer; the attention's s x s tensors are kept only by
    the CPU's math path, and then recomputed. On CPUs, with what a CPU
    process holds beyond its tensors
    (:func:`hpctestlib_ml.memory_estimate.on_cpu`).'''
    estimate = memory_estimate.megatron_estimate(
        shape, vocab, tp, pp, dp, micro_batch, global_batch, precision,
        sequence_parallel=tp > 1 and '--sequence-parallel' in caraml.TRAINING,
        recompute_granularity=('selective' if '--recompute-activations'
                               in caraml.TRAINING else None),
        distributed_optimizer='--use-distributed-optimizer' in
        caraml.OPTIMIZER,
        attention_scores_stored=not on_gpu, **kwargs)
    return estimate if on_gpu else memory_estimate.on_cpu(estimate)


def forward_flops_per_sequence(shape, vocab):
    '''Forward FLOPs of one sequence: Megatron's training formula per token
    (:func:`flops_per_token`) x sequence length / 3 (forward + backward =
    3 forwards).'''
    return (flops_per_token(shape, vocab) * shape['seq_length'] /
            flops.TRAINING_FACTOR)


#: Megatron-LM's vocabulary padding: :func:`~hpctestlib_ml.flops.
#: megatron_padded_vocab` (the log parser pads a stated vocabulary so too).
padded_vocab = flops.megatron_padded_vocab


def log_problems(log, train_iters, world_size):
    '''One-line reasons why a Megatron log (a :class:`~hpctestlib_ml.
    metrics.TrainingLog` of :func:`~hpctestlib_ml.parsers.megatron.
    training_log`) shows a bad run of *train_iters* iterations on
    *world_size* ranks; [] if none: the common checks, once Megatron's
    iteration lines are there at all.'''
    if not log.figures['iterations']:
        return ['no Megatron iteration line in the log']
    return common_problems(log, train_iters, world_size)


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


def model_departures(shape, vocab):
    '''Where the model Megatron builds for *shape* (an entry of
    :data:`MODELS`) with the padded *vocab* departs from the published
    model: the shape's ``departures`` and, where it has any, the padding of
    its vocabulary (the CARAML and Llama 3 sizes have none: they are
    Megatron-LM's models, or Meta's exactly).'''
    found = list(shape.get('departures', ()))
    if found and vocab != shape['vocab']:
        found.append(f'vocabulary padded {shape["vocab"]} -> {vocab} '
                     f'(Megatron-LM\'s multiple of 128 x TP)')
    return found


def departures(data, log_text, shape=None, vocab=None):
    '''The ``departures`` of a run: mock data where CARAML trains on
    OSCAR, where the model departs from the published one
    (:func:`model_departures` of *shape* and *vocab*), and what the
    Megatron-Core fallback says it runs otherwise than Megatron-LM would
    (its ``departures from Megatron-LM`` line); 'none' where none.'''
    found = [] if data.get('data_path') else [
        "mock data (no extras['megatron_data'] or -S data_path)"]
    if shape is not None:
        found += model_departures(shape, vocab)
    match = parser.departures(log_text)
    if match:
        found.append(match)
    return '; '.join(found) or 'none'


def parallel_layout(model_size, world, micro_batch, tensor_parallel=None,
                    pipeline_parallel=None, global_batch=None):
    '''(TP, PP, data parallel, global batch) of *model_size* on *world*
    ranks: the model's TP and PP unless set, the default global batch
    (:func:`default_global_batch`) unless set; a :class:`~hpctestlib_ml.
    errors.BadInputError` naming the fix where they do not fit.'''
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


def program_and_data(model_size, extras, megatron_lm=None, data_path=None):
    '''(Megatron-LM checkout or None, data settings) of a case: the
    variables' values, else the partition's ``extras['megatron_lm']`` and
    ``extras['megatron_data']``; an indexed dataset needs Megatron-LM and
    the GPT-2 vocabulary (a :class:`~hpctestlib_ml.errors.BadInputError`
    naming the fix otherwise).'''
    if megatron_lm is None:
        megatron_lm = extras.get('megatron_lm')
    data = dict(extras.get('megatron_data', {}))
    if data_path:
        data['data_path'] = data_path
    vocab = MODELS[model_size]['vocab']
    if data.get('data_path') and vocab != GPT2_VOCAB:
        raise BadInputError(f'{model_size} trains on mock data with its own '
                            f'vocabulary ({vocab}); the indexed dataset is '
                            f'GPT-2 BPE: leave data_path unset')
    if data.get('data_path') and not megatron_lm:
        raise BadInputError("an indexed dataset needs Megatron-LM itself: set "
                            "-S megatron_lm= (or extras 'megatron_lm'), or "
                            "leave data_path unset for mock data")
    return megatron_lm, data


class MegatronGPTTraining(MLTrainingTest):
    '''Megatron GPT pretraining on mock or indexed data.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - ``model_size`` (:data:`MODELS`)
       * - Variables
         - ``global_batch_size``, ``tensor_parallel``, ``pipeline_parallel``,
           ``megatron_lm``, ``position_embedding_type``, ``untie_embeddings``,
           ``data_path``
       * - Metrics
         - ``tokens_per_second`` (tokens/s), ``time_per_iteration_secs`` (s),
           ``tflops_per_gpu`` (TFLOP/s), ``printed_tflops_per_gpu``
           (TFLOP/s), ``time_per_20m_tokens_secs`` (s)
       * - Partition extras
         - ``megatron_lm``, ``megatron_data``
    '''

    workload = 'megatron'
    program = 'gpt_pretrain'
    throughput_metric = 'tokens_per_second'
    sizes = {
        'tiny': {'batch_size': MODELS['tiny']['micro_batch'],
                 'time_limit': '15m'},
        # Precision: the model size's (benchmark_precision, added by
        # size_table).
        'benchmark': {'steps': BENCHMARK_ITERATIONS, 'time_limit': '1h'},
        # An iteration is a whole global batch: 20 of them are the
        # benchmark's measurement already.
        'short': {'steps': BENCHMARK_ITERATIONS},
    }

    #: Model: ``tiny`` (CPU stand-in), a CARAML size (800M, 13B, 175B),
    #: Llama 3 (llama3-8B, llama3-70B) or GPT-J (gptj-6B).
    model_size = parameter(list(MODELS))

    #: Samples per iteration over all ranks; default: CARAML's
    #: (:func:`hpctestlib_ml.caraml.global_batch`: 32 for 800M, data
    #: parallel x micro batch x 64 for 13B and 175B), CSCS's for Llama 3
    #: (128 and 1024), GPT-J's own for gptj-6B (512), 8 for ``tiny``,
    #: rounded to a multiple of micro batch x data-parallel size. CARAML
    #: sweeps 800M's from 16 to 4096 (its JEDI row: 2048).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (see above)
    global_batch_size = variable(str, int, type(None), value=None)

    #: Tensor parallel size (``--tensor-model-parallel-size``).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the model size's)
    tensor_parallel = variable(str, int, type(None), value=None)

    #: Pipeline parallel size (``--pipeline-model-parallel-size``).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the model size's)
    pipeline_parallel = variable(str, int, type(None), value=None)

    #: A Megatron-LM checkout whose ``pretrain_gpt.py`` runs; default: the
    #: partition's ``extras['megatron_lm']``; none: Megatron-Core's model.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (``extras['megatron_lm']``)
    megatron_lm = variable(str, type(None), value=None)

    #: Position embeddings (``--position-embedding-type``): ``rope`` as
    #: CARAML runs, or Megatron-LM's default ``learned_absolute``.
    #:
    #: :type: :class:`str`
    #: :default: ``'rope'``
    position_embedding_type = variable(str, value=CARAML_POSITION_EMBEDDING)

    #: A separate output layer instead of one tied to the word embeddings
    #: (``--untie-embeddings-and-output-weights``; CARAML ties them).
    #:
    #: :type: :class:`bool`
    #: :default: :obj:`False`
    untie_embeddings = variable(str, bool, value=False)

    #: Megatron indexed dataset (path prefix); default: the partition's
    #: ``extras['megatron_data']['data_path']``; none: mock data.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (``extras['megatron_data']``)
    data_path = variable(str, type(None), value=None)

    def runs_on(self, part):
        size = (self.size if self.size != 'auto' else
                default_size(part.features))
        return model_fits(self.model_size, size, self.scale,
                          partition_facts(part), self.num_nodes)

    @run_after('init')
    def use_the_models_micro_batch(self):
        if self.batch_size is None and self.model_size != 'tiny':
            self.batch_size = MODELS[self.model_size]['micro_batch']

    def size_table(self):
        '''The sizes, with the benchmark precision of the model size as
        CARAML runs it (fp16 for 800M and 13B, bf16 for 175B).'''
        sizes = super().size_table()
        precision = benchmark_precision(self.model_size)
        for name in ('benchmark', 'short'):
            if name in sizes:
                sizes[name] = {**sizes[name], 'precision': precision}
        return sizes

    def reference_case_options(self):
        '''The global batch, the layout, and the program: Megatron-LM's
        figures (CARAML's, jubench's) are not the fallback's.'''
        return {'global_batch_size': self.global_batch_size,
                'tp': self.tp, 'pp': self.pp,
                'program': ('megatron-lm' if self.megatron_lm else
                            'megatron-core')}

    def finalize_settings(self):
        model = MODELS[self.model_size]
        self.model = model
        self.tp, self.pp, self.dp, self.global_batch_size = parallel_layout(
            self.model_size, self.layout.world_size, self.batch_size,
            self.tensor_parallel, self.pipeline_parallel,
            self.global_batch_size)
        self.input_sources = {
            'megatron_lm': ('-S megatron_lm' if self.megatron_lm else
                            "extras['megatron_lm']"),
            'data_path': ('-S data_path' if self.data_path else
                          "extras['megatron_data']['data_path']")}
        self.megatron_lm, self.data = program_and_data(
            self.model_size, self.current_partition.extras,
            self.megatron_lm, self.data_path)
        self.vocab = padded_vocab(model['vocab'], self.tp)
        self.train_iters = self.steps
        self.env_vars.update(caraml.ENVIRONMENT)

    def input_paths(self):
        '''The Megatron-LM checkout (its ``pretrain_gpt.py``) and the
        indexed dataset with its vocabulary, where set.'''
        found = []
        if self.megatron_lm:
            found.append(inputs.Input(self.input_sources['megatron_lm'],
                                      self.megatron_lm, 'dir',
                                      holds=('pretrain_gpt.py',)))
        if self.data.get('data_path'):
            found.append(inputs.Input(self.input_sources['data_path'],
                                      self.data['data_path'], 'prefix'))
            found += [inputs.Input(f"extras['megatron_data'][{name!r}]",
                                   self.data[name], 'file')
                      for name in ('vocab_file', 'merge_file')
                      if self.data.get(name)]
        return found

    def memory_estimate(self):
        '''Per-device memory of the first pipeline stage, as this case
        runs (:func:`estimate_memory`).'''
        return estimate_memory(
            self.model, self.vocab, self.tp, self.pp, self.dp,
            self.batch_size, self.global_batch_size, self.precision,
            on_gpu=self.uses_gpus,
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
                     f'{self.dp}')
        hints.append(f'more model parallelism (-S tensor_parallel=, -S '
                     f'pipeline_parallel=; now {self.tp} and {self.pp})')
        return hints

    def prints_device_records(self):
        '''Megatron-LM's ``pretrain_gpt.py`` prints its own log only; the
        Megatron-Core fallback (``src/gpt_pretrain``) prints the suite's
        records.'''
        return not self.megatron_lm

    def program_args(self):
        args = ['--megatron-lm', self.megatron_lm] if self.megatron_lm else []
        return args + pretrain_arguments(
            self.model, self.tp, self.pp, self.batch_size,
            self.global_batch_size, self.train_iters, self.precision,
            self.data, self.position_embedding_type, self.untie_embeddings)

    @run_before('performance')
    def log_departures(self):
        self.departures = departures(self.data, self.log_text(),
                                     self.model, self.vocab)

    def flops_per_token(self):
        return flops_per_token(self.model, self.vocab)

    def model_flops_per_sample(self):
        '''Per token: the throughput metric counts tokens.'''
        return self.flops_per_token()

    def extract_metrics(self, text):
        return parser.training_log(
            text, seq_length=self.model['seq_length'],
            flops_per_token=self.flops_per_token(),
            gpus=self.layout.world_size)

    def log_problems(self, text):
        return log_problems(self.metrics(), self.train_iters,
                            self.layout.world_size)

    @performance_function('s')
    def time_per_iteration_secs(self):
        '''Mean seconds per iteration, first logged iteration skipped.'''
        return self.metric('time_per_iteration_secs')

    @performance_function('tokens/s')
    def tokens_per_second(self):
        '''Global batch x sequence length / time per iteration.'''
        return self.metric('tokens_per_second')

    @performance_function('TFLOP/s')
    def tflops_per_gpu(self):
        '''Model TFLOP/s per GPU, computed by the suite: tokens/s x
        Megatron-LM's analytic FLOPs per token (the full s x s attention,
        no recomputation: :func:`hpctestlib_ml.flops.
        megatron_gpt_flops_per_token`, whose docstring compares the
        conventions) / GPUs. MFU uses the same FLOPs.'''
        return self.metric('tflops_per_gpu')

    @performance_function('TFLOP/s')
    def printed_tflops_per_gpu(self):
        '''The program's own TFLOP/s figure, as the log prints it:
        information only. Its convention is the program's: upstream
        Megatron-LM's causal-halved formula, or CARAML's patched figure
        with a 4x recompute factor (a third above model FLOPs).'''
        return self.metric('printed_tflops_per_gpu')

    @performance_function('s')
    def time_per_20m_tokens_secs(self):
        '''jubench's LLM metric: 20M tokens / tokens per second.'''
        return JUBENCH_TOKENS / self.metric('tokens_per_second')


def build_model_info(size, device):
    name = {'tiny': 'tiny', 'benchmark': '800M'}.get(size, size)
    if name not in MODELS:
        raise model_info.ModelInfoError(
            f'megatron: unknown size {size!r}: use tiny, benchmark or one '
            f'of {", ".join(MODELS)}')
    shape = MODELS[name]
    vocab = padded_vocab(shape['vocab'], shape['tp'])
    model_info.programs_importable()
    import torch
    from gpt_pretrain import cpu_patches, layer_spec, mcore_train
    # Always meta: RoPE's frequencies would not follow a move.
    device = 'meta'
    args = mcore_train.parse_args(
        model_arguments(shape) +
        ['--micro-batch-size', '1', '--global-batch-size', '1',
         '--train-iters', '1', '--mock-data',
         '--vocab-size', str(shape['vocab']),
         '--tensor-model-parallel-size', str(shape['tp'])])
    cpu_patches.apply()
    seq = shape['seq_length']
    # On any node the same layers, built and run on meta with no CUDA
    # (cpu_patches.device_free): a GPU node's unseeded CUDA RNG tracker
    # refused the attention's dropout there (Storage on an H100).
    with model_info.single_process_group(), cpu_patches.device_free():
        from megatron.core import parallel_state
        # The whole model: tensor parallel 1, with the vocabulary padded
        # for the size's TP, which is what all TP ranks together hold.
        parallel_state.initialize_model_parallel(1, 1)
        try:
            model = mcore_train.build_model(
                args, vocab, device=device,
                choice=layer_spec.choose(args, on_gpu=False))

            def inputs(dev):
                return (torch.zeros(1, seq, dtype=torch.long, device=dev),
                        torch.arange(seq, device=dev).unsqueeze(0),
                        torch.ones(1, 1, seq, seq, dtype=torch.bool,
                                   device=dev))

            llama = (f', {args.normalization}, '
                     f'{"SwiGLU" if args.swiglu else "GeLU"} MLP '
                     f'{args.ffn_hidden_size or 4 * args.hidden_size}, '
                     f'{args.num_query_groups} query groups, '
                     f'{"no " if not args.add_bias_linear else ""}biases, '
                     f'RoPE base {args.rotary_base}'
                     if args.normalization != 'LayerNorm' else '')
            head = args.hidden_size // args.num_attention_heads
            pairs = ', neighbouring pairs' if args.rotary_interleaved else ''
            rotary = (f' on {int(head * args.rotary_percent)} of {head} '
                      f'dimensions a head{pairs}'
                      if args.rotary_percent < 1 else '')
            tied = ('untied' if args.untie_embeddings_and_output_weights
                    else 'tied')
            return model_info.torch_info(
                'megatron', size, name, model, inputs,
                forward_flops_per_sequence(shape, vocab), device,
                f'Megatron-Core GPTModel, {shape["num_layers"]} layers, '
                f'hidden {shape["hidden_size"]}, {seq} tokens, vocabulary '
                f'{vocab} (padded for TP {shape["tp"]}), '
                f'{args.position_embedding_type} positions{rotary}{llama}, '
                f'output layer {tied}',
                published_params=shape.get('published_params', ()),
                departures=tuple(model_departures(shape, vocab)))
        finally:
            parallel_state.destroy_model_parallel()


def build_memory_info(size, layout=None, batch=None, precision=None):
    '''(ModelInfo, MemoryEstimate per device) at *size*, analytic
    (:func:`estimate_memory`): *layout* (tp, pp, dp) default the size's TP
    and PP and DP 1, with CARAML's options (on a GPU); precision: the
    check's (fp32 at tiny, as on CPUs, else the size's).'''
    info = model_info.model_info('megatron', size)
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
    model_info=build_model_info, memory_info=build_memory_info,
    # CARAML's --optimizer adam (Megatron-LM's default); the memory
    # estimate is memory_info's, this is the checkpoint's state.
    optimizer='adam',
    data="Megatron's mock data (or a site's indexed dataset)",
    names_note='gpt_pretrain runs Megatron-LM\'s pretrain_gpt.py, or '
               'Megatron-Core where no checkout is configured',
    packages=('megatron-core',), precisions=precisions.PROGRAM)
