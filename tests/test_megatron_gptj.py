"""Megatron's GPT-J 6B size: GPT-J's shape in Megatron-LM's arguments, the
model Megatron-Core builds for it and how its parameter count differs from
GPT-J's two published ones, the rotary embedding against GPT-J's own, the
departures every result logs, the FLOPs MFU uses."""
import math

import pytest

from conftest import REPO
from hpctestlib_ml import model_info, registry
from hpctestlib_ml.registry import megatron as declared
from hpctestlib_ml.registry.megatron import memory, models
from hpctestlib_ml.workloads.megatron import program

#: transformers' GPTJForCausalLM from a default GPTJConfig (measured on the
#: meta device below) and GPT-J's model card (kingoflolz/mesh-transformer-
#: jax README, "n_parameters").
HF_PARAMS = 6_050_882_784
MODEL_CARD_PARAMS = 6_053_381_344

#: What Megatron-Core builds at TP 1 (vocabulary padded to 50432).
BUILT_PARAMS = 6_051_782_656

L, H, HEADS, FFN, V = 28, 4096, 16, 16384, 50400


def test_model_arguments_of_gptj():
    assert ' '.join(models.model_arguments(models.MODELS['gptj-6B'])) \
        == ('--num-layers 28 --hidden-size 4096 --num-attention-heads 16 '
            '--seq-length 2048 --max-position-embeddings 2048 '
            '--position-embedding-type rope --ffn-hidden-size 16384 '
            '--rotary-percent 0.25 --rotary-interleaved --no-rope-fusion '
            '--attention-dropout 0.0 --hidden-dropout 0.0 '
            '--untie-embeddings-and-output-weights')


def test_gptj_layout_and_batch():
    '''TP 1, PP 1, micro batch 1; GPT-J's global batch of 512 sequences
    (mesh-transformer-jax 6B_roto_256.json: per_replica_batch 1 x 16
    gradient accumulation steps x 256 TPU cores / 8 per replica), bf16.'''
    shape = models.MODELS['gptj-6B']
    assert (shape['tp'], shape['pp'], shape['micro_batch'],
            shape['global_batch']) == (1, 1, 1, 512)
    assert 1 * 16 * 256 // 8 == 512
    assert declared.default_global_batch('gptj-6B', 1, 64) == 512
    assert declared.benchmark_precision('gptj-6B') == 'bf16'
    # 50400 pads to Megatron-LM's multiple of 128 x TP.
    assert [models.padded_vocab(V, tp) for tp in (1, 2, 4, 8)] == \
        [50432, 50432, 50688, 51200]


def test_transformers_gptj_has_the_hub_count():
    '''GPT-J as transformers builds it: one LayerNorm a layer, q/k/v/out
    without biases, fc_in and fc_out with, an lm_head with a bias.'''
    import torch
    transformers = pytest.importorskip('transformers')
    with torch.device('meta'):
        model = transformers.GPTJForCausalLM(transformers.GPTJConfig())
    assert model_info.count_params(model) == HF_PARAMS
    names = {n for n, _ in model.named_parameters()}
    assert 'transformer.h.0.attn.q_proj.bias' not in names
    assert 'transformer.h.0.ln_2.weight' not in names
    assert {'transformer.h.0.mlp.fc_out.bias', 'lm_head.bias'} <= names
    per_layer = 2 * H + 4 * H * H + 2 * H * FFN + FFN + H
    assert HF_PARAMS == 2 * V * H + V + L * per_layer + 2 * H


def test_model_card_counts_the_jax_models_eight_shards():
    '''mesh-transformer-jax (mesh_transformer/layers.py) holds each
    parameter per model-parallel shard (cores_per_replica 8) and its
    README's count is the sharded state's size: every shard keeps its own
    copy of the replicated LayerNorms, its own MLP output bias (added
    before the all-reduce) and embedding bias (the embedding is a one-hot
    Linear). to_hf_weights.py takes one LayerNorm and sums the biases,
    folding the embedding's into the word embeddings.'''
    shards = 8
    embedding = shards * (V // shards * H + H)
    layer = shards * (2 * H                       # ReplicatedLayerNorm
                      + 3 * H * (H // shards)     # q, v, k: no bias
                      + (H // shards) * H         # o: no bias
                      + H * (FFN // shards) + FFN // shards   # dense_proj
                      + (FFN // shards) * H + H)  # dense_proj_o
    projection = shards * (2 * H + H * (V // shards) + V // shards)
    assert embedding + L * layer + projection == MODEL_CARD_PARAMS
    copies = (shards - 1) * ((L + 1) * 2 * H + L * H)
    assert MODEL_CARD_PARAMS - HF_PARAMS == copies + shards * H == 2_498_560


def test_megatron_builds_gptj_with_its_departures():
    '''The model-info build (TP 1): GPT-J's count + a second LayerNorm a
    layer, QKV and attention-output biases, no output bias, 32 padded
    vocabulary rows in the embedding and the output layer.'''
    info = model_info.model_info(registry.get('megatron'), 'gptj-6B')
    assert info.params == BUILT_PARAMS
    assert BUILT_PARAMS - HF_PARAMS == (L * 2 * H + L * 4 * H - V +
                                        2 * (50432 - V) * H) == 899_872
    assert info.published_params == models.GPTJ_PUBLISHED_PARAMS
    assert [c.params for c in info.published_params] == [HF_PARAMS,
                                                     MODEL_CARD_PARAMS]
    assert info.departures == (*models.GPTJ_DEPARTURES,
                               "vocabulary padded 50400 -> 50432 "
                               "(Megatron-LM's multiple of 128 x TP)")
    # FLOPs: GPT-J's matrix products are all there, in another order.
    assert info.flops_ratio == pytest.approx(1, abs=1e-6)
    # The memory estimate counts the same parameters.
    assert memory.megatron_first_stage_parameters(
        models.MODELS['gptj-6B'], 50432, 1, 1) == BUILT_PARAMS


def test_model_info_command_says_which_count(capsys):
    from hpctestlib_ml import cli
    assert cli.main(['model-info', 'megatron', '--size', 'gptj-6B']) == 0
    out = capsys.readouterr().out
    assert f'parameters              {BUILT_PARAMS:,} (the model built)' \
        in out
    assert (f"{HF_PARAMS:,}: transformers' GPTJForCausalLM from a default "
            f"GPTJConfig") in out
    assert f'{MODEL_CARD_PARAMS:,}: GPT-J\'s model card' in out
    assert 'the model built has +899,872' in out
    assert 'Megatron-Core has no parallel residual' in out


def test_runs_log_the_departures_from_gptj():
    shape = models.MODELS['gptj-6B']
    logged = program.departures({}, '', shape, 50432)
    for line in models.GPTJ_DEPARTURES:
        assert line in logged
    assert 'vocabulary padded 50400 -> 50432' in logged
    assert 'vocabulary padded 50400 -> 51200' in program.departures(
        {}, '', shape, 51200)
    # Megatron-LM's own sizes and Meta's Llama 3 depart in nothing.
    for size in ('800M', 'llama3-70B'):
        assert program.departures({'data_path': 'x'}, '',
                                   models.MODELS[size], 51200) == 'none'


def test_rotary_embedding_is_gptjs():
    '''Megatron-Core's RoPE at --rotary-percent 0.25 --rotary-interleaved
    on a 256-wide head equals transformers' GPT-J rotary embedding
    (rotate_every_two on the first 64 dimensions, the rest passed
    through), on the same queries.'''
    import sys
    import torch
    gptj = pytest.importorskip('transformers.models.gptj.modeling_gptj')
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import cpu_patches, mcore_train
    cpu_patches.apply()
    shape = {**models.MODELS['gptj-6B'], 'num_layers': 1,
             'hidden_size': 512, 'num_attention_heads': 2,
             'ffn_hidden_size': 1024, 'seq_length': 16}
    args = mcore_train.parse_args(
        models.model_arguments(shape) +
        ['--micro-batch-size', '1', '--global-batch-size', '1',
         '--train-iters', '1'])
    seq, heads, head = 16, 2, 256
    query = torch.randn(seq, 1, heads, head,
                        generator=torch.Generator().manual_seed(0))
    with model_info.single_process_group():
        from megatron.core import parallel_state
        from megatron.core.models.common.embeddings.rope_utils import \
            apply_rotary_pos_emb
        parallel_state.initialize_model_parallel(1, 1)
        try:
            model = mcore_train.build_model(args, 1024)
            assert model.config.rotary_interleaved
            assert model.rotary_pos_emb.inv_freq.numel() == 64 // 2
            ours = apply_rotary_pos_emb(query, model.rotary_pos_emb(seq),
                                        model.config)
        finally:
            parallel_state.destroy_model_parallel()
    # transformers' layout: [batch, seq, heads, head dim].
    q = query.permute(1, 0, 2, 3)
    sincos = gptj.create_sinusoidal_positions(seq, 64)[None]
    sin, cos = torch.split(sincos, 32, dim=-1)
    theirs = torch.cat([gptj.apply_rotary_pos_emb(q[..., :64], sin, cos),
                        q[..., 64:]], dim=-1).permute(1, 0, 2, 3)
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert not torch.allclose(ours[1:, ..., :64], query[1:, ..., :64])
    assert torch.equal(ours[..., 64:], query[..., 64:])


@pytest.mark.integration
def test_gptj_layers_follow_one_rank_at_tp2(tmp_path):
    '''GPT-J's arguments at a tiny width (partial, interleaved RoPE,
    untied output, no dropout) train with Megatron-Core alone on this
    CPU, the same loss curve at TP 2 as on one rank.'''
    from test_megatron import megatron_core_losses
    extra = ['--rotary-percent', '0.25', '--rotary-interleaved',
             '--untie-embeddings-and-output-weights']
    one = megatron_core_losses(tmp_path, 1, port=29651, extra=extra)
    tensor = megatron_core_losses(tmp_path, 2, tp=2, port=29652,
                                  extra=extra)
    assert len(one) == 6 and all(math.isfinite(x) for x in one)
    assert tensor == pytest.approx(one, rel=1e-5)
    assert one[0] == pytest.approx(math.log(4096), rel=0.02)
