"""Megatron's Llama 3 sizes: Meta's architecture and parameter counts,
Megatron-LM's arguments, the FLOPs MFU uses against the built model, and
CSCS's layout in a JUWELS Booster job script."""
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import BIN, REPO
from hpctestlib_ml import flops, model_info, registry
from hpctestlib_ml.registry.megatron import caraml, models
from hpctestlib_ml.workloads.megatron import parallel

#: Meta's parameter counts (Llama 3 model cards; the Hugging Face
#: checkpoints' sums): untied output layer, vocabulary 128,256; from the
#: declaration (``models.PUBLISHED``).
META_PARAMS = {size: count.params for size in ('llama3-8B', 'llama3-70B')
               for count in models.PUBLISHED[size]}

#: What CSCS publishes for its GH200 runs (cscs-reframe-tests
#: checks/apps/pytorch/pytorch_megatronlm.py at 2f813557): tokens/s per
#: GPU, TFLOP/s per GPU.
CSCS_REFERENCE = {'llama3-8B': (7600.0, 440.0), 'llama3-70B': (870.0, 420.0)}

#: Megatron-LM's arguments for Llama 3 (megatron/training/arguments.py:
#: --normalization, --norm-epsilon, --disable-bias-linear and
#: --num-query-groups come from TransformerConfig's fields, the others are
#: declared there).
LLAMA_ARGS = ('--group-query-attention --num-query-groups 8 '
              '--normalization RMSNorm --norm-epsilon 1e-05 --swiglu '
              '--disable-bias-linear --rotary-base 500000 '
              '--attention-dropout 0.0 --hidden-dropout 0.0 '
              '--untie-embeddings-and-output-weights')


def test_model_arguments_of_the_llama_sizes():
    assert ' '.join(models.model_arguments(models.MODELS['llama3-8B'])) \
        == ('--num-layers 32 --hidden-size 4096 --num-attention-heads 32 '
            '--seq-length 8192 --max-position-embeddings 8192 '
            '--position-embedding-type rope --ffn-hidden-size 14336 ' +
            LLAMA_ARGS)
    assert ' '.join(models.model_arguments(models.MODELS['llama3-70B'])) \
        == ('--num-layers 80 --hidden-size 8192 --num-attention-heads 64 '
            '--seq-length 8192 --max-position-embeddings 8192 '
            '--position-embedding-type rope --ffn-hidden-size 28672 ' +
            LLAMA_ARGS)


def test_gpt_sizes_keep_megatron_lms_defaults():
    for size in ('tiny', '800M', '13B', '175B'):
        shape = models.MODELS[size]
        assert shape['vocab'] == models.GPT2_VOCAB
        assert models.model_arguments(shape) == [
            '--num-layers', str(shape['num_layers']),
            '--hidden-size', str(shape['hidden_size']),
            '--num-attention-heads', str(shape['num_attention_heads']),
            '--seq-length', str(shape['seq_length']),
            '--max-position-embeddings', str(shape['seq_length']),
            '--position-embedding-type', 'rope'] + (
                # CARAML's modelargs for 13B: 4h, written out.
                ['--ffn-hidden-size', '20480'] if size == '13B' else [])


def test_cscs_layout():
    # TP, PP, micro batch, global batch of CSCS's llama3-8b and -70b (TP
    # None there: the 4 GPUs of a GH200 node).
    for size, layout in (('llama3-8B', (1, 1, 1, 128)),
                         ('llama3-70B', (4, 8, 1, 1024))):
        shape = models.MODELS[size]
        assert (shape['tp'], shape['pp'], shape['micro_batch'],
                shape['global_batch']) == layout
    # 16 and 32 nodes of 4 GPUs: data parallel 64 and 4.
    assert parallel.data_parallel_size(64, 1, 1) == 64
    assert parallel.data_parallel_size(128, 4, 8) == 4


def test_llama3_vocabulary_padding():
    '''128256 = 1002 x 128: no padding at TP 1 and 2, 256 rows at TP 4
    (70B's layout), 768 at TP 8.'''
    assert [models.padded_vocab(128256, tp) for tp in (1, 2, 4, 8)] == \
        [128256, 128256, 128512, 129024]


def build_on_meta(size, vocab, **shape_changes):
    '''The fallback's model of *size* on the meta device, whole (TP 1).'''
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import cpu_patches, mcore_train
    cpu_patches.apply()
    shape = {**models.MODELS[size], **shape_changes}
    args = mcore_train.parse_args(
        models.model_arguments(shape) +
        ['--micro-batch-size', '1', '--global-batch-size', '1',
         '--train-iters', '1', '--vocab-size', str(shape['vocab'])])
    with model_info.single_process_group():
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(1, 1)
        try:
            return mcore_train.build_model(args, vocab, device='meta')
        finally:
            parallel_state.destroy_model_parallel()


@pytest.mark.parametrize('size', sorted(META_PARAMS))
def test_meta_build_has_metas_parameter_count(size):
    '''The whole model at TP 1 (vocabulary unpadded) has Meta's count;
    built on the meta device in a fraction of a second (here, 2 CPU
    cores: 8B 0.15 s, 70B 0.23 s once Megatron-Core is imported, which
    takes 6 s; 0.75 GB peak memory, the imports').'''
    start = time.perf_counter()
    model = build_on_meta(size, models.padded_vocab(128256, 1))
    elapsed = time.perf_counter() - start
    assert model_info.count_params(model) == META_PARAMS[size]
    assert elapsed < 60
    shape = models.MODELS[size]
    h, heads = shape['hidden_size'], shape['num_attention_heads']
    layer = model.decoder.layers[0]
    # No biases, RMSNorm everywhere, GQA's fused QKV, SwiGLU's fused fc1.
    assert not any(name.endswith('bias') for name, _ in
                   model.named_parameters())
    import torch
    norms = [m for m in model.modules() if isinstance(m, torch.nn.RMSNorm)]
    assert len(norms) == 2 * shape['num_layers'] + 1
    assert all(n.eps == 1e-5 for n in norms)
    assert tuple(layer.self_attention.linear_qkv.weight.shape) == \
        (h + 2 * 8 * h // heads, h)
    assert tuple(layer.mlp.linear_fc1.weight.shape) == \
        (2 * shape['ffn_hidden_size'], h)
    assert not model.share_embeddings_and_output_weights


def test_model_info_counts_the_padded_vocabulary_of_the_layout():
    '''model-info builds each size with the vocabulary padded for its TP:
    8B at TP 1 is Meta's model, 70B at TP 4 has 256 padding rows in the
    embedding and in the output layer.'''
    assert model_info.model_info(registry.get('megatron'), 'llama3-8B').params == \
        META_PARAMS['llama3-8B']
    assert model_info.model_info(registry.get('megatron'), 'llama3-70B').params == \
        META_PARAMS['llama3-70B'] + 2 * 256 * 8192


@pytest.mark.parametrize('size', sorted(META_PARAMS))
def test_analytic_flops_are_the_built_llama(size):
    '''Megatron-LM's formula with GQA and SwiGLU, the full s x s attention
    counted, against FlopCounterMode on the model as built, full shape
    (8192 tokens), on the meta device: equal (ratio 1.000000; norms, SiLU
    and RoPE are elementwise, counted by neither).'''
    info = model_info.model_info(registry.get('megatron'), size)
    assert info.flops_ratio == pytest.approx(1, abs=1e-6)


def test_fallback_prints_the_suites_flops():
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import mcore_train
    for size in ('800M', 'llama3-8B', 'llama3-70B'):
        shape = models.MODELS[size]
        vocab = models.padded_vocab(shape['vocab'], shape['tp'])
        args = mcore_train.parse_args(
            models.model_arguments(shape) +
            ['--micro-batch-size', '1', '--global-batch-size', '1',
             '--train-iters', '1'])
        assert mcore_train.training_flops_per_token(args, vocab) == \
            pytest.approx(models.flops_per_token(shape, vocab), rel=1e-12)


def test_cscs_tflops_use_the_suites_convention():
    '''CSCS's published TFLOP/s per GPU are its tokens/s per GPU x the
    suite's FLOPs per token (full s x s attention; 57.9 and 481.4 GFLOP),
    within 0.5%: 440.1 vs 440 and 418.9 vs 420. Upstream's causal-halved
    count would give 391 for 8B.'''
    for size, (tokens, tflops) in CSCS_REFERENCE.items():
        shape = models.MODELS[size]
        per_token = models.flops_per_token(
            shape, models.padded_vocab(shape['vocab'], shape['tp']))
        assert tokens * per_token / 1e12 == pytest.approx(tflops, rel=0.005)


def test_gqa_and_swiglu_terms_of_the_formula():
    # Per token and layer, x 6 (multiply-add, forward + backward): QKV
    # h (h + 2 h g/n), output h^2, scores and values 2 s h, MLP 3 h ffn;
    # logits h V.
    L, h, s, ffn, V = 32, 4096, 8192, 14336, 128256
    by_hand = 6 * (L * (h * (h + 2 * h // 4) + h * h + 2 * s * h +
                        3 * h * ffn) + h * V)
    assert flops.megatron_gpt_flops_per_token(
        L, h, s, V, ffn_hidden=ffn, query_groups_ratio=8 / 32,
        swiglu=True) == pytest.approx(by_hand, rel=1e-12)


def test_rotary_base_reaches_the_model():
    '''RoPE's frequencies with base 500,000 (a narrow stand-in on the CPU:
    head size 64).'''
    import torch
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import cpu_patches, mcore_train
    cpu_patches.apply()
    shape = {**models.MODELS['llama3-8B'], 'num_layers': 1,
             'hidden_size': 256, 'num_attention_heads': 4,
             'num_query_groups': 2, 'ffn_hidden_size': 512}
    args = mcore_train.parse_args(
        models.model_arguments(shape) +
        ['--micro-batch-size', '1', '--global-batch-size', '1',
         '--train-iters', '1'])
    with model_info.single_process_group():
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(1, 1)
        try:
            model = mcore_train.build_model(args, 1024)
        finally:
            parallel_state.destroy_model_parallel()
    inv_freq = model.rotary_pos_emb.inv_freq
    assert inv_freq[1].item() == pytest.approx(500000 ** (-2 / 64),
                                               rel=1e-6)
    assert isinstance(model.decoder.final_layernorm, torch.nn.RMSNorm)


def juwels_dry_run(tmp_path, size, nodes):
    '''reframe --dry-run on JUWELS Booster of *size* at *nodes* nodes
    (``-S num_nodes``, on the 16-node scale's case); the job script. CSCS
    runs these on GH200s of 96 GB; on JUWELS' A100s of 40 GB the memory
    check skips them (8B at TP 1: 86 GiB), so it is turned off here, where
    the job's command is what is looked at.'''
    env = {**os.environ, 'HPCML_VAR_DIR': str(tmp_path / 'var'),
           'HPCML_CACHE_DIR': str(tmp_path / 'cache'),
           'HPCML_ACCOUNT': 'jscbenchmark',
           'PYTHONPATH': os.pathsep.join(
               [str(REPO)] + os.environ.get('PYTHONPATH', '').split(
                   os.pathsep)).rstrip(os.pathsep)}
    proc = subprocess.run(
        [BIN / 'reframe', '-C', REPO / 'config/systems/juwels_booster.py',
         '-c', REPO / 'checks/megatron.py', '-n',
         f'^MegatronGPT%scale=16_nodes%launch_mode=per_task%'
         f'model_size={size}$', '-S', f'num_nodes={nodes}',
         '-S', 'memory_check=false', '--dry-run'],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    scripts = list((tmp_path / 'var' / 'stage').rglob('rfm_job.sh'))
    assert len(scripts) == 1, proc.stdout[-3000:]
    return scripts[0].read_text()


@pytest.mark.integration
@pytest.mark.parametrize('size, nodes, layout, batch', [
    ('llama3-8B', 16, '--tensor-model-parallel-size 1 '
                      '--pipeline-model-parallel-size 1', 128),
    ('llama3-70B', 32, '--tensor-model-parallel-size 4 '
                       '--pipeline-model-parallel-size 8', 1024),
])
def test_cscs_layout_on_juwels(tmp_path, size, nodes, layout, batch):
    '''CSCS's node counts on JUWELS Booster (4 GPUs a node, as GH200
    nodes): one srun task per GPU, the Megatron-Core fallback with the
    Llama arguments, CSCS's TP/PP and batches, Llama 3's vocabulary.'''
    text = juwels_dry_run(tmp_path, size, nodes)
    sbatch = re.findall(r'^#SBATCH (.*)$', text, re.MULTILINE)
    assert f'--ntasks={4 * nodes}' in sbatch
    assert '--ntasks-per-node=4' in sbatch and '--gres=gpu:4' in sbatch
    line = text.strip().splitlines()[-1]
    assert line.startswith('srun --cpus-per-task=24 --kill-on-bad-exit=1 ')
    assert ' per_task python3 -u -m gpt_pretrain ' in line
    assert ' '.join(models.model_arguments(models.MODELS[size])) in line
    assert LLAMA_ARGS in line
    assert f'--micro-batch-size 1 --global-batch-size {batch} ' in line
    assert layout in line
    assert ('--mock-data --tokenizer-type NullTokenizer '
            '--vocab-size 128256 ') in line
    # CARAML's training arguments at bf16.
    assert ' '.join(caraml.arguments('bf16')) in line
    # The fallback reads every model argument and takes the layout.
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import mcore_train
    import shlex
    args = mcore_train.parse_args(shlex.split(line.split(
        '-m gpt_pretrain ', 1)[1]))
    assert not [a for a in args.ignored if a in LLAMA_ARGS.split()]
    dp, micro = mcore_train.layout(args, 4 * nodes)
    assert (dp, micro) == ((64, 2) if size == 'llama3-8B' else (4, 256))
    assert (args.normalization, args.swiglu, args.add_bias_linear,
            args.num_query_groups, args.rotary_base) == \
        ('RMSNorm', True, False, 8, 500000)


@pytest.mark.integration
def test_llama_layers_follow_one_rank_in_every_layout(tmp_path):
    '''The Llama 3 architecture at a tiny width (RMSNorm, SwiGLU, no
    biases, 2 query groups for 4 heads, RoPE base 500000, untied output),
    PP 2 and TP 2 with Megatron-Core alone on this CPU: the loss curve of
    one rank. TP 2 splits the query groups and the gated MLP's [gate; up]
    halves; each rank draws its slices of the unsplit model.'''
    import math
    from test_megatron import megatron_core_losses
    extra = ['--ffn-hidden-size', '512', '--group-query-attention',
             '--num-query-groups', '2', '--normalization', 'RMSNorm',
             '--norm-epsilon', '1e-5', '--swiglu', '--disable-bias-linear',
             '--rotary-base', '500000',
             '--untie-embeddings-and-output-weights']
    one = megatron_core_losses(tmp_path, 1, port=29641, extra=extra)
    pipeline = megatron_core_losses(tmp_path, 2, pp=2, port=29642,
                                    extra=extra)
    tensor = megatron_core_losses(tmp_path, 2, tp=2, port=29643,
                                  extra=extra)
    assert len(one) == 6 and all(math.isfinite(x) for x in one)
    assert pipeline == pytest.approx(one, rel=1e-5)
    assert tensor == pytest.approx(one, rel=1e-5)
    assert one[0] == pytest.approx(math.log(4096), rel=0.02)
