"""The models of the Megatron workload (:mod:`hpctestlib_ml.registry.
megatron`): their shapes, vocabularies and layouts, the arguments that
make them in ``pretrain_gpt.py``, their FLOPs, and where what Megatron
builds departs from the published model.

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

from hpctestlib_ml import flops
from hpctestlib_ml.model_info import Published


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
#: builds (the module docstring).
GPTJ_PUBLISHED_PARAMS = (
    Published(6_050_882_784, "transformers' GPTJForCausalLM from a default "
              "GPTJConfig (the Hub's checkpoint)",
              'https://github.com/huggingface/transformers/blob/main/src/'
              'transformers/models/gptj/modeling_gptj.py', built=False),
    Published(6_053_381_344, "GPT-J's model card (mesh-transformer-jax, "
              "n_parameters): its 8 shards' parameters, with 7 more copies "
              "of every LayerNorm and MLP output bias, and the embedding's "
              "bias", 'https://github.com/kingoflolz/mesh-transformer-jax',
              built=False),
)

#: Model size -> the counts published for it
#: (:attr:`hpctestlib_ml.registry.Workload.published`): Meta's Llama 3
#: (the model cards' checkpoints: untied output layer, vocabulary
#: 128,256), and GPT-J's. CARAML's GPT sizes have no published count: the
#: tests hold them to the closed form of Megatron's GPT.
PUBLISHED = {
    'llama3-8B': (
        Published(8_030_261_248, "Meta's Llama 3 8B (the Hub checkpoint's "
                  "parameters)",
                  'https://huggingface.co/meta-llama/Meta-Llama-3-8B'),),
    'llama3-70B': (
        Published(70_553_706_496, "Meta's Llama 3 70B (the Hub checkpoint's "
                  "parameters; model-info pads the vocabulary for its TP 4)",
                  'https://huggingface.co/meta-llama/Meta-Llama-3-70B',
                  built=False),),
    'gptj-6B': GPTJ_PUBLISHED_PARAMS,
}

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
#: where CARAML has none (:func:`hpctestlib_ml.registry.megatron.caraml.global_batch`). The
#: CARAML sizes are its benchmark's; ``tiny`` is the suite's CPU stand-in;
#: the Llama 3 sizes and their layout and batch are CSCS's, GPT-J's batch
#: its own (see the module docstring), trained with CARAML's other
#: arguments (bf16); ``departures``: where the model built departs from
#: the published one (its counts: :data:`PUBLISHED`).
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
                'departures': GPTJ_DEPARTURES},
}

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


#: Megatron-LM's vocabulary padding: :func:`~hpctestlib_ml.flops.
#: megatron_padded_vocab` (the log parser pads a stated vocabulary so too).
padded_vocab = flops.megatron_padded_vocab


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


def forward_flops_per_sequence(shape, vocab):
    '''Forward FLOPs of one sequence: Megatron's training formula per token
    (:func:`flops_per_token`) x sequence length / 3 (forward + backward =
    3 forwards).'''
    return (flops_per_token(shape, vocab) * shape['seq_length'] /
            flops.TRAINING_FACTOR)


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
