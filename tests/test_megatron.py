"""Megatron: the iteration-line parser on real logs, FLOPs, layouts."""
import math

import pytest

from conftest import extract, read_data
from hpctestlib_ml import flops
from hpctestlib_ml.registry.megatron import models
from hpctestlib_ml.workloads.megatron import parallel
from hpctestlib_ml.parsers import megatron as parser, megatron_args


def jubench():
    # The verification lines of jubench's Megatron-LM README (175B on
    # JUWELS Booster): seconds, "[defaultN]:" prefixes, CARAML-style TFLOPs.
    return read_data('megatron', 'jubench_readme_verification.log')


def suite_run():
    # src/gpt_pretrain (Megatron-Core) under torchrun with 2 ranks, this CPU.
    return (read_data('megatron', 'mcore_cpu_2ranks_torchrun.out') + '\n' +
            read_data('megatron', 'mcore_cpu_2ranks_torchrun.err'))


def test_seconds_form_with_torchrun_prefix():
    steps = parser.parse_iterations(jubench())
    assert [s['iteration'] for s in steps] == [10, 20, 30, 40, 50]
    assert steps[0]['time_s'] == 7.2310
    assert steps[1]['printed_tflops'] == 137.10
    assert steps[0]['global_batch'] == 96
    assert steps[-1]['loss'] == pytest.approx(8.110270)


def test_jubench_tokens_per_second_matches_its_published_figure():
    m = parser.extract_metrics(jubench(), seq_length=2048)
    # First interval skipped: mean of the 4 others.
    assert m['time_per_iteration_secs'] == pytest.approx(
        (5.3551 + 5.6192 + 5.3291 + 5.3247) / 4)
    # jubench reports 36,055 tokens/s for this configuration.
    assert m['tokens_per_second'] == pytest.approx(36055, rel=0.01)
    assert m['printed_tflops_per_gpu'] == pytest.approx(135.855)


def test_suite_computes_tflops_from_megatrons_formula_not_the_printed_one():
    model = models.MODELS['175B']
    per_token = flops.megatron_gpt_flops_per_token(
        model['num_layers'], model['hidden_size'], 2048, 50304)
    m = parser.extract_metrics(jubench(), seq_length=2048,
                               flops_per_token=per_token, world_size=384)
    # CARAML/BigScience print with a 4x recompute factor: a third more
    # than the 3x model FLOPs the suite reports.
    assert m['printed_tflops_per_gpu'] / m['tflops_per_gpu'] == \
        pytest.approx(4 / 3, rel=0.02)


def test_milliseconds_form_of_the_suites_own_run():
    text = suite_run()
    steps = parser.parse_iterations(text)
    assert [s['iteration'] for s in steps] == list(range(1, 9))
    assert all(s['time_s'] < 5 for s in steps)
    assert parser.world_size(text) == 2
    stated = megatron_args.stated(text).values
    assert {k: stated.get(k) for k in ('num_layers', 'hidden_size',
                                       'seq_length', 'padded_vocab_size',
                                       'ffn_hidden_size', 'world_size')} == \
        dict(num_layers=2, hidden_size=256, seq_length=128,
             padded_vocab_size=50304, ffn_hidden_size=1024, world_size=2)
    m = extract('megatron', text)
    assert m['iterations'] == 8 and m['iteration_last'] == 8
    assert m['tokens_per_second'] == pytest.approx(
        8 * 128 / m['time_per_iteration_secs'])
    assert m['tflops_per_gpu'] == pytest.approx(
        m['tokens_per_second'] * flops.megatron_gpt_flops_per_token(
            2, 256, 128, 50304) / 2 / 1e12)
    assert 'MHA' in m['flops_formula'] and 'GeLU' in m['flops_formula']
    assert m['loss_all_finite']
    # Random tokens: the loss stays near ln(vocabulary).
    assert abs(m['loss_last'] - math.log(50304)) < 0.5


def test_flops_formula_equals_narayanan_for_4h_ffn():
    L, h, s, V = 96, 12288, 2048, 50304
    narayanan = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    assert flops.megatron_gpt_flops_per_token(L, h, s, V) == \
        pytest.approx(narayanan)


def test_padded_vocab_and_data_parallel_size():
    assert models.padded_vocab(50257, 1) == 50304
    assert models.padded_vocab(50257, 8) == 51200
    assert parallel.data_parallel_size(384, 8, 8) == 6
    with pytest.raises(ValueError, match='use a multiple of 64 GPUs'):
        parallel.data_parallel_size(40, 8, 8)


def test_no_iterations_no_numbers():
    m = parser.extract_metrics('Traceback (most recent call last):\n')
    assert m['iterations'] == 0 and m['tokens_per_second'] is None


def megatron_core_run(tmp_path, procs, pp=1, tp=1, port=29610, extra=(),
                      dropout='0'):
    '''The fallback (Megatron-Core alone) for 6 iterations of a tiny GPT
    under torchrun with gloo; its logged iterations and its log.'''
    import os
    import subprocess
    import sys
    from conftest import REPO
    proc = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc-per-node',
         str(procs), '--master-port', str(port), '-m', 'gpt_pretrain',
         '--num-layers', '2', '--hidden-size', '256', '--num-attention-heads',
         '4', '--seq-length', '128', '--max-position-embeddings', '128',
         '--micro-batch-size', '2', '--global-batch-size', '8',
         '--train-iters', '6', '--lr', '1e-3', '--mock-data',
         # A vocabulary that pads alike at TP 1 and 2 (4096), no dropout:
         # the same tokens and arithmetic in every layout.
         '--vocab-size', '4096', '--hidden-dropout', dropout,
         '--attention-dropout', dropout, '--position-embedding-type', 'rope',
         '--pipeline-model-parallel-size', str(pp),
         '--tensor-model-parallel-size', str(tp), *extra],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
             'OMP_NUM_THREADS': '1'},
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout + proc.stderr
    assert f'pipeline-model-parallel size: {pp}' in text
    return parser.parse_iterations(text), text


def megatron_core_losses(tmp_path, procs, **kwargs):
    '''The losses :func:`megatron_core_run` logs.'''
    iterations, _ = megatron_core_run(tmp_path, procs, **kwargs)
    return [s['loss'] for s in iterations]


@pytest.fixture(scope='module')
def one_rank(tmp_path_factory):
    '''The one-rank loss curve the layouts are held against.'''
    return megatron_core_losses(tmp_path_factory.mktemp('one'), 1,
                                port=29611)


@pytest.mark.integration
def test_pipeline_and_tensor_parallel_follow_one_rank(tmp_path, one_rank):
    '''PP=2 and TP=2 with Megatron-Core alone (no Megatron-LM), on this
    CPU with gloo: the same loss curve as one rank from the same seed
    (the weights do not depend on the layout).'''
    one = one_rank
    pipeline = megatron_core_losses(tmp_path, 2, pp=2, port=29612)
    tensor = megatron_core_losses(tmp_path, 2, tp=2, port=29613)
    assert len(one) == 6 and all(math.isfinite(x) for x in one)
    assert pipeline == pytest.approx(one, rel=1e-5)
    assert tensor == pytest.approx(one, rel=1e-5)
    # Random weights on random tokens: the first loss is ln(vocabulary).
    assert one[0] == pytest.approx(math.log(4096), rel=0.02)


@pytest.mark.integration
def test_data_parallel_and_distributed_optimizer_follow_one_rank(tmp_path,
                                                                one_rank):
    '''Data parallel 2, with Megatron-Core's DDP and with its distributed
    optimizer (optimizer state and main weights sharded, gradients
    reduce-scattered, weights all-gathered): the same samples in the same
    order as one rank (Megatron's sampler order), so the same loss curve.'''
    one = one_rank
    ddp = megatron_core_losses(tmp_path, 2, port=29622)
    sharded = megatron_core_losses(tmp_path, 2, port=29623,
                                   extra=['--use-distributed-optimizer'])
    assert ddp == pytest.approx(one, rel=1e-5)
    assert sharded == pytest.approx(one, rel=1e-5)


@pytest.mark.integration
def test_sequence_parallel_follows_one_rank(tmp_path, one_rank):
    '''TP 2 with sequence parallelism (norms and dropout on sequence
    shards, all-gather / reduce-scatter around the tensor-parallel
    layers, the norms' gradients all-reduced by finalize_model_grads):
    the one-rank loss curve.'''
    one = one_rank
    iterations, text = megatron_core_run(tmp_path, 2, tp=2, port=29625,
                                         extra=['--sequence-parallel'])
    assert 'sequence parallel: True' in text
    assert [s['loss'] for s in iterations] == pytest.approx(one, rel=1e-5)


@pytest.mark.integration
def test_selective_recomputation_keeps_the_loss(tmp_path):
    '''Selective recomputation (core attention recomputed in the backward)
    gives the loss curve of no recomputation, dropout included (its RNG
    state is restored for the recomputation).'''
    plain = megatron_core_losses(tmp_path, 1, port=29626, dropout='0.1')
    iterations, text = megatron_core_run(
        tmp_path, 1, port=29627, dropout='0.1',
        extra=['--recompute-activations', '--recompute-granularity',
               'selective'])
    assert 'recomputation: selective' in text
    assert [s['loss'] for s in iterations] == pytest.approx(plain, rel=1e-6)


@pytest.mark.integration
def test_fp16_trains_with_main_weights_and_loss_scaling(tmp_path, one_rank):
    '''fp16 as CARAML runs 800M and 13B: fp32 main weights and the
    dynamic loss scaler (CARAML's scaler arguments). Pure fp16 weights and
    Adam state (the fallback before) gave NaN from iteration 2; here the
    losses stay finite and follow fp32's. Over 30 s (about 35 s): two
    runs, fp16 and fp32, to compare the curves.'''
    fp32 = one_rank
    iterations, text = megatron_core_run(
        tmp_path, 1, port=29629,
        extra=['--fp16', '--initial-loss-scale', '4096',
               '--loss-scale-window', '500', '--hysteresis', '2',
               '--min-loss-scale', '1.0'])
    losses = [s['loss'] for s in iterations]
    assert len(losses) == 6 and all(math.isfinite(x) for x in losses), text
    assert not any(s['nan'] for s in iterations)
    assert losses == pytest.approx(fp32, rel=1e-2)
    assert 'loss scale: 4096.0' in text


def saved_activation_bytes(recompute):
    '''Bytes the forward pass of a small Megatron-Core GPT (the fallback's
    own builder, sequence 512) keeps for the backward, with and without
    selective recomputation.'''
    import sys
    import torch
    from conftest import REPO
    from hpctestlib_ml.model_info import single_process_group
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import cpu_patches, mcore_train
    cpu_patches.apply()
    argv = ['--num-layers', '2', '--hidden-size', '128',
            '--num-attention-heads', '4', '--seq-length', '512',
            '--micro-batch-size', '2', '--global-batch-size', '2',
            '--train-iters', '1', '--mock-data', '--vocab-size', '1024',
            '--attention-dropout', '0.1']
    if recompute:
        argv.append('--recompute-activations')
    args = mcore_train.parse_args(argv)
    saved = {}

    def pack(tensor):
        saved[id(tensor.untyped_storage())] = tensor.untyped_storage().nbytes()
        return tensor
    with single_process_group():
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(1, 1)
        try:
            model = mcore_train.build_model(args, 1024)
            tokens, positions, mask, labels = mcore_train.mock_batch(
                args, 1024, 0, 'cpu')
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                model(tokens, positions, mask, labels=labels).sum()
        finally:
            parallel_state.destroy_model_parallel()
    return sum(saved.values())


def test_selective_recomputation_drops_the_attention_scores():
    '''Selective recomputation keeps the core attention's inputs instead
    of its b x heads x s^2 tensors: on this CPU in fp32 three of them per
    layer (the softmax's output, dropout's mask, a float one on the CPU,
    and dropout's output that the context product keeps), 12 bytes an
    element; at b 2, 4 heads, s 512 and 2 layers, 50.3 MB less. (In fp16
    on a GPU Megatron counts 5 bytes an element: Korthikanti et al. 2022,
    "Reducing Activation Recomputation in Large Transformer Models".)'''
    plain = saved_activation_bytes(False)
    recomputed = saved_activation_bytes(True)
    scores = 2 * 2 * 4 * 512 * 512 * 12
    assert plain - recomputed == pytest.approx(scores, rel=0.01)


@pytest.mark.parametrize('groups', [4, 2])
def test_sdpa_attention_equals_megatrons_math_path(groups):
    '''The fallback's attention on GPU nodes (PyTorch's fused kernels)
    computes what Megatron-Core's DotProductAttention does: same causal
    mask, softmax scale and output layout, grouped-query attention
    (2 key/value groups for 4 heads) included; here on the CPU, where
    SDPA runs its math kernel.'''
    import sys
    import torch
    from conftest import REPO
    from hpctestlib_ml.model_info import single_process_group
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import cpu_patches
    cpu_patches.apply()
    from gpt_pretrain.layer_spec import SdpaAttention
    from megatron.core.transformer.dot_product_attention import \
        DotProductAttention
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.transformer_config import \
        TransformerConfig
    s, b, n, d = 64, 2, 4, 16
    with single_process_group():
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(1, 1)
        try:
            config = TransformerConfig(
                num_layers=1, hidden_size=n * d, num_attention_heads=n,
                num_query_groups=groups, attention_dropout=0.0,
                use_cpu_initialization=True)
            made = {kind: kind(config, 1, AttnMaskType.causal, 'self')
                    for kind in (DotProductAttention, SdpaAttention)}
            torch.manual_seed(0)
            q = torch.randn(s, b, n, d)
            k, v = torch.randn(s, b, groups, d), torch.randn(s, b, groups, d)
            mask = torch.triu(torch.ones(s, s, dtype=torch.bool),
                              diagonal=1).view(1, 1, s, s)
            math_path = made[DotProductAttention](q, k, v, mask)
            sdpa = made[SdpaAttention](q, k, v, mask)
        finally:
            parallel_state.destroy_model_parallel()
    assert sdpa.shape == math_path.shape == (s, b, n * d)
    torch.testing.assert_close(sdpa, math_path, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('te, apex', [(True, False), (False, False),
                                      (False, True)])
def test_the_layer_choice_on_a_gpu_node(monkeypatch, te, apex):
    '''What the fallback builds on a GPU node, with Transformer Engine,
    with apex only, with neither: Megatron-Core's spec functions are
    called with arguments their signatures take (Transformer Engine's has
    no ``normalization``), and the departures say what is not
    Megatron-LM's.'''
    import inspect
    import sys
    import torch
    from conftest import REPO
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import layer_spec
    from megatron.core.models.gpt import gpt_layer_specs as specs
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(layer_spec, '_importable', lambda name: {
        'transformer_engine': te, 'apex': apex}[name])
    real_te = specs.get_gpt_layer_with_transformer_engine_spec

    def te_spec(*args, **kwargs):
        inspect.signature(real_te).bind(*args, **kwargs)
        return 'TE spec'
    monkeypatch.setattr(specs, 'get_gpt_layer_with_transformer_engine_spec',
                        te_spec)
    args = type('Args', (), {'use_flash_attn': True,
                             'normalization': 'RMSNorm'})()
    choice = layer_spec.choose(args)
    if te:
        assert choice.layer == 'TE spec' and choice.departures == []
        return
    attention = choice.layer.submodules.self_attention.submodules
    assert attention.core_attention is layer_spec.SdpaAttention
    assert any('SDPA' in d for d in choice.departures)
    # RMSNorm: torch's (apex's fused norm has none), marked for SP.
    assert choice.final_norm is layer_spec.TorchNorm
    assert any('norms: torch' in d for d in choice.departures)
