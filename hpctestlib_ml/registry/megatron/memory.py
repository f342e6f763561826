"""Megatron GPT's memory per device, before a case is queued: analytic,
from the model's shape and parallel layout, after Megatron-LM's own
``megatron/training/theoretical_memory_usage.py`` (its bytes per parameter,
and for activations Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", Table 2), for the first
pipeline stage, the largest: it holds the word embeddings and, with 1F1B
scheduling, up to PP micro-batches in flight.

The estimate's terms, the reserve a device keeps and the fit:
:mod:`hpctestlib_ml.memory_estimate`, which every workload's estimate
shares; the options CARAML's arguments turn on:
:func:`hpctestlib_ml.registry.megatron.estimate_memory`.
"""
from hpctestlib_ml.memory_estimate import MemoryEstimate

#: Bytes of one element by precision, as the programs name them.
ELEMENT_BYTES = {'fp32': 4, 'tf32': 4, 'bf16': 2, 'fp16': 2}


# Bytes per parameter

def megatron_parameter_bytes(precision, distributed_optimizer, dp):
    '''(weights, gradients, optimizer) bytes per parameter of Megatron-LM
    with Adam: its docs/user-guide/features/dist_optimizer.md table.

    ======================================  ========  =============
    parameters, gradients                   Adam      distributed
    ======================================  ========  =============
    fp16 params, fp16 grads (``--fp16``)    20        4 + 16/d
    bf16 params, fp32 grads (``--bf16``)    18        6 + 12/d
    fp32 params, fp32 grads                 16        8 + 8/d
    ======================================  ========  =============

    The optimizer term holds the fp32 master weights, fp32 main gradients
    (fp16 only: bf16's gradient buffer is fp32 already) and the two Adam
    moments; the distributed optimizer shards it over the *dp* replicas.
    (``theoretical_memory_usage.py`` always counts the bf16 row.)'''
    if precision == 'fp16':
        weights, grads, optim = 2, 2, 16
    elif precision == 'bf16':
        weights, grads, optim = 2, 4, 12
    else:
        weights, grads, optim = 4, 4, 8
    return weights, grads, optim / (dp if distributed_optimizer else 1)


# The first pipeline stage

def megatron_shape(shape, vocab):
    '''*shape* (an entry of
    :data:`hpctestlib_ml.registry.megatron.models.MODELS`) with the
    optional keys' defaults: ``ffn_hidden_size`` 4h,
    ``num_query_groups`` the heads, ``swiglu`` False, ``kv_channels``
    h / heads, ``add_bias_linear`` True, ``normalization`` LayerNorm,
    ``untie_embeddings`` False; ``vocab``: the padded vocabulary.'''
    h, a = shape['hidden_size'], shape['num_attention_heads']
    return {
        'L': shape['num_layers'], 'h': h, 'a': a, 's': shape['seq_length'],
        'f': shape.get('ffn_hidden_size') or 4 * h,
        'g': shape.get('num_query_groups') or a,
        'd': shape.get('kv_channels') or h // a,
        'swiglu': bool(shape.get('swiglu', False)),
        'bias': bool(shape.get('add_bias_linear', True)),
        'norm': 1 if shape.get('normalization') == 'RMSNorm' else 2,
        'untie': bool(shape.get('untie_embeddings', False)),
        'V': vocab,
    }


def megatron_first_stage_parameters(shape, vocab, tp, pp, untie=None,
                                    learned_positions=False):
    '''Parameters on one device of the first pipeline stage: its L/PP
    layers' share for TP, the word embeddings' (and, untied at PP 1, the
    output layer's) 1/TP, the replicated norms and row-parallel biases,
    learned position embeddings (s x h) where used.'''
    m = megatron_shape(shape, vocab)
    h, f, d, a, g = m['h'], m['f'], m['d'], m['a'], m['g']
    gate = 2 if m['swiglu'] else 1
    qkv = h * d * (a + 2 * g)
    sharded = (qkv + d * a * h + gate * h * f + f * h
               + (d * (a + 2 * g) + gate * f if m['bias'] else 0))
    replicated = (2 * h if m['bias'] else 0) + 2 * m['norm'] * h
    layers = m['L'] / pp
    untie = m['untie'] if untie is None else untie
    embeddings = m['V'] * h * (2 if untie and pp == 1 else 1)
    per_device = (layers * sharded + embeddings) / tp + layers * replicated
    if pp == 1:
        per_device += m['norm'] * h                  # final norm
    if learned_positions:
        per_device += m['s'] * h
    return per_device


def megatron_activation_bytes(shape, vocab, tp, pp, micro_batch,
                              num_microbatches, precision,
                              sequence_parallel, recompute_granularity,
                              attention_scores_stored=True):
    '''Activation bytes on one device of the first pipeline stage.

    Per layer, in units of s x b x h (Korthikanti et al. 2022, Table 2,
    generalised to an FFN of f, SwiGLU and grouped queries; at a GPT shape,
    16-bit: 34, split 10 + 24/TP without sequence parallelism):

    - kept whole on every TP rank unless sequence parallel: the two norms'
      inputs, the QKV and first MLP linear layers' inputs (4 elements),
      two dropout masks (1 byte each);
    - split over TP: Q, K and V (1 + 2 g/a), the output projection's input
      (1), the MLP activation's input and the second linear layer's
      input (2 f/h, SwiGLU 3 f/h);
    - the attention scores (softmax, its dropout mask and output: 5 a s /
      h at 16 bit, split over TP), unless recomputed (``selective``) or
      never materialised (flash attention: *attention_scores_stored*
      False);
    - ``full`` recomputation keeps only each layer's input.

    The first stage holds its L/PP layers for min(PP, micro-batches)
    micro-batches in flight (1F1B): L x min(1, m/PP) layers' worth, plus
    the embedding's input ids (8 bytes a token) and dropout mask; at PP 1
    also the output layer's input and the fp32 logits of the loss (4 s b
    (h + V)). With sequence parallel all of it is split over TP, as
    Megatron-LM's ``compute_activation_memory`` counts it.
    '''
    m = megatron_shape(shape, vocab)
    h, a, g, f, s, V = m['h'], m['a'], m['g'], m['f'], m['s'], m['V']
    e = ELEMENT_BYTES.get(precision, 4)
    sbh = s * micro_batch * h
    gate = 3 if m['swiglu'] else 2
    if recompute_granularity == 'full':
        layer = e * sbh / (tp if sequence_parallel else 1)
    else:
        whole = (4 * e + 2) * sbh
        split = e * (1 + 2 * g / a + 1 + gate * f / h) * sbh
        layer = (whole + split) / tp if sequence_parallel else \
            whole + split / tp
        if recompute_granularity != 'selective' and attention_scores_stored:
            layer += (2 * e + 1) * a * s * s * micro_batch / tp
    total = layer * m['L']
    embedding = (8 * s * micro_batch + s * micro_batch * h) * pp
    total += embedding / (tp if sequence_parallel else 1)
    if pp > 1:
        total *= min(1, num_microbatches / pp)
    else:
        if sequence_parallel:
            total += 4 * sbh * (1 + V / h) / tp
        else:
            total += 4 * sbh + 4 * s * micro_batch * V / tp
    return total


def megatron_estimate(shape, vocab, tp, pp, dp, micro_batch, global_batch,
                      precision, sequence_parallel=False,
                      recompute_granularity=None,
                      distributed_optimizer=False,
                      attention_scores_stored=False,
                      untie=None, learned_positions=False):
    '''The :class:`MemoryEstimate` of a device of the first pipeline stage
    of Megatron GPT training, Megatron-LM's ``pretrain_gpt.py`` or the
    suite's Megatron-Core fallback (the same optimizer: fp32 main weights
    and Adam moments for fp16/bf16, sharded by the distributed optimizer).
    *attention_scores_stored*: the core attention keeps its s x s tensors
    for the backward (the math path, the fallback's on CPUs; not with flash
    attention, nor under selective recomputation).'''
    per_param = megatron_parameter_bytes(precision, distributed_optimizer,
                                         dp)
    params = megatron_first_stage_parameters(shape, vocab, tp, pp, untie,
                                             learned_positions)
    num_microbatches = global_batch // (micro_batch * dp)
    acts = megatron_activation_bytes(
        shape, vocab, tp, pp, micro_batch, num_microbatches, precision,
        sequence_parallel, recompute_granularity,
        attention_scores_stored=attention_scores_stored)
    options = [o for o, on in (('sequence parallel', sequence_parallel),
                               ('distributed optimizer',
                                distributed_optimizer)) if on]
    options.append(f'{recompute_granularity} recomputation'
                   if recompute_granularity else 'no recomputation')
    assumptions = (
        'first pipeline stage (the largest: word embeddings, '
        f'{min(pp, num_microbatches)} micro-batch(es) in flight)',
        'fp32 main weights and Adam moments' if precision != 'fp32' else
        'fp32 weights and Adam moments',
        'attention scores kept (math path)' if attention_scores_stored
        else 'no attention scores kept (flash attention or recomputed)',
    )
    return MemoryEstimate(
        weights=params * per_param[0], gradients=params * per_param[1],
        optimizer=params * per_param[2], activations=acts,
        setting=(f'TP{tp}xPP{pp}xDP{dp}, micro batch {micro_batch}, '
                 f'{num_microbatches} micro-batches, {precision}, '
                 + ', '.join(options)),
        assumptions=assumptions)
