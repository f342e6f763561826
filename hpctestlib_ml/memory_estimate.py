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

Megatron GPT's estimate is analytic
(:mod:`hpctestlib_ml.registry.megatron.memory`); the other PyTorch
workloads' activations are measured (:func:`saved_tensor_bytes`).
"""
import dataclasses

GIB = 2 ** 30

#: Memory of a device kept free of the estimate: CUDA context, allocator
#: cache and fragmentation, communication buffers (NCCL), kernel
#: workspaces. The larger of the two.
RESERVE_FRACTION = 0.10
RESERVE_MIN_GIB = 2.0

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
    for each count published for another build of it, so that a table of
    "memory required to train" can be compared with the model the program
    builds.'''
    per = fp32_adam_bytes_per_parameter()
    lines = [f'  {per} B/param fp32 Adam     '
             f'{fp32_adam_megabytes(info.params):,.1f} MB (10^6 B) for '
             f'{info.params:,} parameters: fp32 weights, gradients and '
             f'Adam\'s two moments, no activations, whatever the program '
             f'trains with (as tables of "memory required to train" '
             f'count)']
    lines += [f'{"":<26}{fp32_adam_megabytes(count.params):,.1f} MB for '
              f'the published {count.params:,}'
              for count in info.counts_beside]
    return '\n'.join(lines)


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
