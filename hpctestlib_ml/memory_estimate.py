"""Will it fit? Per-device memory of a training case, before it is queued.

An estimate is four terms, in bytes per device (:class:`MemoryEstimate`),
and on CPUs a fifth (:func:`on_cpu`):

- ``weights``: the parameters as the program holds them;
- ``gradients``: their gradients (the buffer the backward pass fills);
- ``optimizer``: optimizer states and, with mixed precision, the fp32
  master weights (and fp32 main gradients where the optimizer keeps them);
- ``activations``: what the forward pass keeps for the backward pass, with
  the recomputation in use; None where it is not estimated (no number
  rather than a made-up one).

Not counted: the CUDA context, the allocator's fragmentation and cache,
communication buffers, temporaries of single kernels. :func:`usable_gib`
reserves room for them: :data:`RESERVE_FRACTION` of the device's memory,
at least :data:`RESERVE_MIN_GIB`.

Megatron GPT (:func:`megatron_estimate`) is analytic, from the model's
shape and parallel layout, after Megatron-LM's own
``megatron/training/theoretical_memory_usage.py`` (its bytes per parameter,
and for activations Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", Table 2), for the first
pipeline stage, the largest: it holds the word embeddings and, with 1F1B
scheduling, up to PP micro-batches in flight. The other PyTorch workloads'
activations are measured (:func:`saved_tensor_bytes`).
"""
import dataclasses

GIB = 2 ** 30

#: Memory of a device kept free of the estimate: CUDA context, allocator
#: cache and fragmentation, communication buffers (NCCL), kernel
#: workspaces. The larger of the two.
RESERVE_FRACTION = 0.10
RESERVE_MIN_GIB = 2.0

#: Bytes of one element by precision, as the programs name them.
ELEMENT_BYTES = {'fp32': 4, 'tf32': 4, 'bf16': 2, 'fp16': 2}

#: Optimizer states per parameter (each as large as an fp32 parameter):
#: Adam, AdamW and LAMB keep two moments, SGD with momentum one.
OPTIMIZER_STATES = {'adam': 2, 'adamw': 2, 'lamb': 2, 'sgd_momentum': 1,
                    'sgd': 0}


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    '''Bytes per device of a training case (see the module docstring).'''
    weights: float
    gradients: float
    optimizer: float
    activations: float = None
    #: The case, e.g. ``TP1xPP1xDP1, micro batch 1, fp32``.
    setting: str = ''
    #: What the figures assume, one sentence each.
    assumptions: tuple = ()
    #: On CPUs: what the process holds beyond those tensors
    #: (:func:`on_cpu`); 0 on GPUs, whose reserve covers the context.
    cpu_overhead: float = 0.0

    @property
    def total(self):
        return (self.weights + self.gradients + self.optimizer +
                (self.activations or 0) + self.cpu_overhead)

    @property
    def static(self):
        '''Weights, gradients and optimizer: what does not grow with the
        batch.'''
        return self.weights + self.gradients + self.optimizer

    def gib(self):
        '''The terms and the total in GiB (activations None where not
        estimated).'''
        return {'weights': self.weights / GIB,
                'gradients': self.gradients / GIB,
                'optimizer': self.optimizer / GIB,
                'activations': (None if self.activations is None else
                                self.activations / GIB),
                'cpu_overhead': self.cpu_overhead / GIB,
                'total': self.total / GIB}

    def describe(self):
        '''``an estimated 23.1 GiB per device (weights 3.4, gradients 3.4,
        optimizer 6.8, activations 9.5) at TP1xPP1xDP1, micro batch 1,
        fp32``.'''
        g = self.gib()
        acts = ('activations not estimated' if g['activations'] is None
                else f'activations {g["activations"]:.1f}')
        if self.cpu_overhead:
            acts += f', CPU overhead {g["cpu_overhead"]:.1f}'
        return (f'an estimated {g["total"]:.1f} GiB per device (weights '
                f'{g["weights"]:.1f}, gradients {g["gradients"]:.1f}, '
                f'optimizer {g["optimizer"]:.1f}, {acts})'
                + (f' at {self.setting}' if self.setting else ''))

    def as_dict(self):
        return {**{f'{k}_gib': v for k, v in self.gib().items()},
                'setting': self.setting,
                'assumptions': list(self.assumptions)}


#: On CPUs a process holds more than its tensors: glibc's allocator keeps
#: freed blocks, the unfused math path keeps more than Megatron's formula
#: counts (fp32 dropout masks, RoPE's intermediates), and Python, torch
#: and Megatron-Core take their share. Measured on this project's 2-core
#: VM with the Megatron-Core fallback at 800M's width (fp32, micro batch
#: 1, CARAML's arguments, 3 iterations, /usr/bin/time's maximum resident
#: set): 2 layers 6.19 GB and 4 layers 8.85 GB resident where the tensors
#: are estimated at 4.25 and 6.41 GB: resident = 1.23 x tensors + 0.97 GB,
#: which puts all 16 layers at 24.8 GB (the kernel killed that run on a
#: 24 GiB VM in its second iteration, the first with Adam's state).
CPU_RESIDENT_FACTOR = 1.23
CPU_PROCESS_BYTES = 0.97e9


def on_cpu(estimate):
    '''*estimate* with the :attr:`MemoryEstimate.cpu_overhead` a CPU
    process adds (:data:`CPU_RESIDENT_FACTOR`, :data:`CPU_PROCESS_BYTES`).'''
    tensors = estimate.total - estimate.cpu_overhead
    return dataclasses.replace(
        estimate, cpu_overhead=(CPU_RESIDENT_FACTOR - 1) * tensors +
        CPU_PROCESS_BYTES,
        assumptions=(*estimate.assumptions,
                     f'CPU: resident {CPU_RESIDENT_FACTOR} x the tensors + '
                     f'{CPU_PROCESS_BYTES / 1e9:.2f} GB, as measured'))


def format_estimate(estimate):
    '''Human-readable lines of *estimate*.'''
    g = estimate.gib()
    lines = [f'  memory per device       {estimate.setting}']
    for name in ('weights', 'gradients', 'optimizer', 'activations'):
        value = g[name]
        lines.append(f'    {name:<21} ' + ('not estimated' if value is None
                                            else f'{value:8.2f} GiB'))
    lines.append(f'    {"total":<21} {g["total"]:8.2f} GiB')
    lines += [f'    - {a}' for a in estimate.assumptions]
    return '\n'.join(lines)


# Fitting

def usable_gib(device_gib):
    '''What an estimate may use of a device of *device_gib* GiB: all but
    the reserve (:data:`RESERVE_FRACTION`, at least
    :data:`RESERVE_MIN_GIB`).'''
    return device_gib - max(RESERVE_MIN_GIB, RESERVE_FRACTION * device_gib)


def tensor_room(estimate, device_gib):
    '''Bytes *estimate*'s tensors may take on a device of *device_gib*
    GiB: what :func:`usable_gib` leaves, less, on CPUs, what the process
    holds beyond its tensors (:func:`on_cpu`).'''
    room = usable_gib(device_gib) * GIB
    if estimate.cpu_overhead:
        room = (room - CPU_PROCESS_BYTES) / CPU_RESIDENT_FACTOR
    return room


def fits(estimate, device_gib):
    '''Whether *estimate* fits a device of *device_gib* GiB, its reserve
    kept free.'''
    return estimate.total / GIB <= usable_gib(device_gib)


def largest_batch(estimate, batch, device_gib):
    '''The largest per-device (micro) batch that would fit, from
    *estimate* at *batch* (activations grow with the batch, the rest does
    not); 0 where not even the weights and optimizer fit, None where the
    activations are not estimated.'''
    if not estimate.activations:
        return None
    room = tensor_room(estimate, device_gib) - estimate.static
    if room <= 0:
        return 0
    return int(room // (estimate.activations / batch))


# Bytes per parameter

def amp_parameter_bytes(optimizer):
    '''(weights, gradients, optimizer) bytes per parameter of a PyTorch
    program with fp32 parameters, whether it trains in fp32 or with
    ``torch.autocast`` mixed precision (fp32 weights and gradients either
    way, no master copy), and *optimizer*'s states in fp32.'''
    return 4, 4, 4 * OPTIMIZER_STATES[optimizer]


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


# The model's state alone, as tables of "memory required to train" give it

def fp32_adam_bytes_per_parameter():
    '''16: fp32 weights and gradients and Adam's two fp32 moments
    (:func:`amp_parameter_bytes`), the bytes a parameter that tables of
    "memory required to train" count, whatever optimizer and precision a
    program uses; no activations.'''
    return sum(amp_parameter_bytes('adam'))


def fp32_adam_megabytes(params):
    '''The state of *params* parameters at
    :func:`fp32_adam_bytes_per_parameter`, in MB of 10^6 bytes (the unit
    that reproduces such tables: GPT-J's 6,053,381,344 parameters are
    96,854 MB).'''
    return params * fp32_adam_bytes_per_parameter() / 1e6


def format_fp32_adam(info):
    '''Lines giving :func:`fp32_adam_megabytes` of *info* (a
    :class:`~hpctestlib_ml.model_info.ModelInfo`), for the model built and
    for each count published for it, so that a table of "memory required
    to train" can be compared with the model the program builds.'''
    per = fp32_adam_bytes_per_parameter()
    lines = [f'  {per} B/param fp32 Adam     '
             f'{fp32_adam_megabytes(info.params):,.1f} MB (10^6 B) for '
             f'{info.params:,} parameters: fp32 weights, gradients and '
             f'Adam\'s two moments, no activations, whatever the program '
             f'trains with (as tables of "memory required to train" '
             f'count)']
    lines += [f'{"":<26}{fp32_adam_megabytes(count):,.1f} MB for the '
              f'published {count:,}' for count, _ in info.published_params]
    return '\n'.join(lines)


# Megatron GPT

def megatron_shape(shape, vocab):
    '''*shape* (an entry of :data:`hpctestlib_ml.workloads.megatron.MODELS`) with
    the optional keys' defaults: ``ffn_hidden_size`` 4h,
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


# Measured activations (any PyTorch model)

def saved_tensor_bytes(model, inputs, device='meta'):
    '''Bytes of the tensors one forward pass of *model* on ``inputs(
    device)`` saves for the backward pass, each storage once.

    Measured under ``torch.autograd.graph.saved_tensors_hooks``, on the
    ``meta`` device (shapes, no memory or arithmetic). Meta tensors have
    no data pointer: a storage is told by the identity of its
    ``untyped_storage()`` (views of one tensor share it; a tensor saved by
    several operations is counted once), sized by its ``nbytes()``.
    Parameters (saved by every linear layer) are not activations: their
    storages are left out. The model is in training mode (dropout's masks
    count); the dtype is the model's (fp32: under autocast mixed precision
    the matrix products would keep 16-bit inputs, so this is an upper
    bound there).'''
    import torch
    params = {id_of(p) for p in model.parameters()}
    seen = {}

    def pack(tensor):
        key = id_of(tensor)
        if key not in params and key not in seen:
            seen[key] = tensor.untyped_storage().nbytes()
        return tensor

    model.train()
    with torch.device(device):
        args = inputs(device)
        # The storages must outlive the pass for their identities to be
        # unique: the output keeps the graph (and its saved tensors).
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(*args)
    del out
    return sum(seen.values())


def id_of(tensor):
    '''Identity of *tensor*'s storage (meta tensors: the storage object's
    C pointer; ``data_ptr()`` is 0 there).'''
    storage = tensor.untyped_storage()
    ptr = storage.data_ptr()
    return ptr if ptr else ('meta', storage._cdata)


def generic_estimate(params, optimizer, activation_bytes_per_sample, batch,
                     precision, setting='', assumptions=()):
    '''A PyTorch program with fp32 parameters (fp32 or autocast mixed
    precision) and *optimizer*: :func:`amp_parameter_bytes` x *params*,
    activations *activation_bytes_per_sample* x *batch* (None: not
    estimated).'''
    w, g, o = amp_parameter_bytes(optimizer)
    acts = (None if activation_bytes_per_sample is None else
            activation_bytes_per_sample * batch)
    return MemoryEstimate(
        weights=params * w, gradients=params * g, optimizer=params * o,
        activations=acts,
        setting=setting or f'batch {batch}, {precision}, {optimizer}',
        assumptions=tuple(assumptions))
