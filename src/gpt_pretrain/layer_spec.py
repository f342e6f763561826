"""The layer spec the Megatron-Core fallback builds: which attention and
which norms, where Megatron-LM would run Transformer Engine's.

Megatron-LM with ``--use-flash-attn`` (CARAML's argument) runs
Transformer Engine's layer spec, whose core attention is FlashAttention
and whose norms are fused into the next linear layer. The fallback takes,
in this order:

1. Transformer Engine's spec, where ``transformer_engine`` imports and a
   GPU is present: the same kernels as Megatron-LM;
2. else Megatron-Core's local spec, with

   - core attention: on GPU nodes with ``--use-flash-attn``,
     :class:`SdpaAttention`, PyTorch's ``scaled_dot_product_attention``,
     which picks FlashAttention-2 or the memory-efficient kernel (no s x s
     score matrix is kept); on CPUs Megatron-Core's own
     ``DotProductAttention``, the math path with the scores materialised
     (what Megatron-LM runs without ``--use-flash-attn``);
   - norms: apex's fused LayerNorm where apex is installed, else
     :class:`TorchNorm`, torch's LayerNorm/RMSNorm that also runs under
     sequence parallelism (Megatron-Core's own torch wrapper refuses it).

:func:`choose` returns the layers (:class:`Choice`), a line saying what
they hold, and the departures from what Megatron-LM would run (printed by
the program, logged by the check).
"""
import torch
import torch.nn.functional as F

from megatron.core import tensor_parallel
from megatron.core.transformer.dot_product_attention import \
    DotProductAttention


class SdpaAttention(DotProductAttention):
    '''Megatron-Core's core attention through
    ``torch.nn.functional.scaled_dot_product_attention``: the same inputs
    ([s, b, heads, head dim] query, key and value, key and value with
    fewer heads under grouped-query attention), the same causal mask,
    softmax scale and attention dropout, the same [s, b, hidden] output.
    '''

    def forward(self, query, key, value, attention_mask, attn_mask_type=None,
                attention_bias=None, packed_seq_params=None):
        assert packed_seq_params is None and attention_bias is None, \
            'SdpaAttention: packed sequences and attention bias unsupported'
        # [s, b, n, d] -> [b, n, s, d]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        dropout = self.attention_dropout.p if self.training else 0.0
        groups = (self.num_attention_heads_per_partition //
                  self.num_query_groups_per_partition)
        if groups > 1:
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)

        def attend():
            return F.scaled_dot_product_attention(
                q, k, v, dropout_p=dropout, is_causal=True,
                scale=self.softmax_scale)
        if dropout and not self.config.sequence_parallel:
            # Dropout draws from the tensor-parallel RNG, as Megatron's.
            with tensor_parallel.get_cuda_rng_tracker().fork():
                context = attend()
        else:
            context = attend()
        # [b, n, s, d] -> [s, b, n * d]
        b, n, s, d = context.shape
        return context.permute(2, 0, 1, 3).reshape(s, b, n * d)


class TorchNorm:
    '''torch's ``LayerNorm`` (or ``RMSNorm``, ``config.normalization``)
    as Megatron-Core's norm module. Under sequence parallelism each
    tensor-parallel rank normalises its own part of the sequence with the
    same weights, so their gradients are partial sums: the weights are
    marked ``sequence_parallel`` and ``finalize_model_grads`` all-reduces
    them over the tensor-parallel group, as it does apex's and Transformer
    Engine's norms.'''

    def __new__(cls, config, hidden_size, eps=1e-5, **kwargs):
        kind = (torch.nn.RMSNorm if config.normalization == 'RMSNorm' else
                torch.nn.LayerNorm)
        norm = kind(hidden_size, eps=eps)
        for param in norm.parameters():
            param.sequence_parallel = config.sequence_parallel
        return norm


def _importable(name):
    try:
        __import__(name)
    except ImportError:
        return False
    return True


class Choice:
    '''The layers the fallback builds: one layer's spec, the decoder's
    final norm, what they hold (a line for the log) and the departures
    from what Megatron-LM would run.'''

    def __init__(self, layer, final_norm, description, departures):
        self.layer, self.final_norm = layer, final_norm
        self.description, self.departures = description, departures

    def block(self, config):
        '''The decoder block's spec for *config*'s pipeline stage: this
        layer for every layer it builds, and the final norm (given a layer
        spec alone, Megatron-Core takes the final norm from what is
        installed: apex's FusedLayerNorm, which has no RMSNorm).'''
        from megatron.core.transformer.transformer_block import (
            TransformerBlockSubmodules, get_num_layers_to_build)
        return TransformerBlockSubmodules(
            layer_specs=[self.layer] * get_num_layers_to_build(config),
            layer_norm=self.final_norm)


def _local_spec(normalization):
    '''Megatron-Core's local layer spec; asking it for RMSNorm rebinds the
    backends' default norm for every later spec of this process, which is
    put back.'''
    from megatron.core.models import backends
    from megatron.core.models.gpt import gpt_layer_specs as specs
    default_norm = backends.LNImpl
    try:
        return specs.get_gpt_layer_local_spec(normalization=normalization)
    finally:
        backends.LNImpl = default_norm


def choose(args, on_gpu=None):
    '''The :class:`Choice` for *args* on this node (module docstring);
    *on_gpu* False: the CPU's layers on any node (``hpcml model-info``
    builds on the meta device, the same parameters either way).'''
    from megatron.core.models.gpt import gpt_layer_specs as specs
    from megatron.core.transformer import transformer_block
    normalization = getattr(args, 'normalization', 'LayerNorm')
    flash = getattr(args, 'use_flash_attn', False)
    if on_gpu is None:
        on_gpu = torch.cuda.is_available()
    if on_gpu and _importable('transformer_engine'):
        # TE's norms read config.normalization (LayerNorm or RMSNorm).
        spec = specs.get_gpt_layer_with_transformer_engine_spec()
        return Choice(spec, transformer_block.LayerNormImpl,
                      'Transformer Engine (fused attention and norms)', [])
    spec = _local_spec(normalization)
    departures = []
    layer = spec.submodules
    if _importable('apex') and normalization == 'LayerNorm':
        norms, final_norm = 'apex fused', transformer_block.LayerNormImpl
    else:
        norms, final_norm = 'torch', TorchNorm
        layer.input_layernorm = layer.pre_mlp_layernorm = TorchNorm
        if on_gpu:
            departures.append('norms: torch, not fused (no Transformer '
                              'Engine or apex)')
    if on_gpu and flash:
        layer.self_attention.submodules.core_attention = SdpaAttention
        attention = 'PyTorch scaled_dot_product_attention'
        departures.append('attention: PyTorch SDPA kernels, not Transformer '
                          'Engine (transformer_engine is not installed)')
    else:
        attention = 'Megatron-Core DotProductAttention (math)'
        if flash:
            departures.append('attention: unfused math path, no '
                              'flash-attn (no GPU)')
    return Choice(spec, final_norm, f'{attention}; norms: {norms}',
                  departures)
