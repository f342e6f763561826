"""Initialise a Megatron-Core GPT stage so that its weights do not depend
on the parallel layout.

Megatron-Core initialises each rank's parameters as it builds them, from
the random stream in that order, so the same seed gives other weights with
another tensor- or pipeline-parallel split, and the loss curves of two
layouts cannot be compared. Here every parameter is drawn whole, from a
generator seeded by the seed and its name in the unsplit model (layers
numbered globally), with Megatron's distributions (``init_method_normal``,
``scaled_init_method_normal`` for the output projections of attention and
MLP, zero biases, unit norms), and this rank keeps its tensor-parallel
slice. A pipeline's last stage gets the word embeddings' values in its
tied output layer, as Megatron's ``setup_embeddings_and_output_layer``
copies them. The same weights, whatever the layout.
"""
import hashlib
import math
import re

import torch

#: Output projections, scaled by 1/sqrt(2 L) (Megatron's
#: ``output_layer_init_method``).
_OUTPUT_PROJECTIONS = ('self_attention.linear_proj.weight',
                       'mlp.linear_fc2.weight')


def _generator(seed, name):
    digest = hashlib.sha256(f'{seed}:{name}'.encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], 'little'))


def global_names(model):
    '''{parameter: its name in the unsplit model}: decoder layers renamed
    by their global number, a pipeline's last-stage tied output layer
    named as the word embeddings.'''
    renamed = {}
    for index, layer in enumerate(model.decoder.layers):
        renamed[f'decoder.layers.{index}.'] = \
            f'decoder.layers.{layer.layer_number - 1}.'
    shared = (model.share_embeddings_and_output_weights and
              model.post_process and not model.pre_process)
    names = {}
    for name, param in model.named_parameters():
        match = re.match(r'decoder\.layers\.\d+\.', name)
        if match:
            name = renamed[match.group(0)] + name[match.end():]
        if shared and name == 'output_layer.weight':
            name = 'embedding.word_embeddings.weight'
        names[param] = name
    return names


@torch.no_grad()
def initialise(model, seed, std, num_layers, tp_rank, tp_size):
    '''Draw every parameter of *model* (one pipeline stage on one
    tensor-parallel rank) from its unsplit name and keep this rank's
    slice.'''
    scaled = std / math.sqrt(2.0 * num_layers)
    gated = model.config.gated_linear_unit
    for param, name in global_names(model).items():
        full = list(param.shape)
        split = getattr(param, 'tensor_model_parallel', False)
        if split:
            full[param.partition_dim] *= tp_size
        module, last = name.split('.')[-2:]
        if last == 'bias' or last.endswith('_bias'):
            values = torch.zeros(full)
        elif 'norm' in module or last.endswith('norm_weight'):
            # A norm module's weight, or Transformer Engine's norm fused
            # into the next linear layer (linear_qkv.layer_norm_weight).
            values = torch.ones(full)
        else:
            sigma = scaled if name.endswith(_OUTPUT_PROJECTIONS) else std
            values = torch.empty(full).normal_(
                0.0, sigma, generator=_generator(seed, name))
        if split and gated and name.endswith('mlp.linear_fc1.weight'):
            # A gated MLP's first layer is [gate; up], and each rank holds
            # [its slice of gate; its slice of up] (the MLP chunks the
            # rank's output in two).
            values = torch.cat([half.chunk(tp_size, dim=0)[tp_rank]
                                for half in values.chunk(2, dim=0)])
        elif split:
            values = values.chunk(tp_size, dim=param.partition_dim)[tp_rank]
        param.copy_(values.to(param.dtype))
