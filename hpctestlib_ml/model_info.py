"""``hpcml model-info``: the model a workload's program builds at a size.

For each workload and size it builds the model with the program's own code
(``src/<program>``, the builder the training run calls), on the ``meta``
device where it is large (shapes without memory or arithmetic), and reports:

- ``params``: its parameter count;
- ``analytic_forward_flops``: the forward FLOPs per sample that the suite's
  MFU uses (:mod:`hpctestlib_ml.flops` and the workload modules; MFU counts
  3x this per trained sample);
- ``measured_forward_flops``: the forward FLOPs of that same model on one
  sample, counted by ``torch.utils.flop_counter.FlopCounterMode`` (matrix
  multiplications, convolutions, attention; elementwise work is not
  counted), or for TensorFlow by TensorFlow's graph profiler.

Everything is offline: no weights or data are loaded from a hub.
"""
import contextlib
import contextvars
import dataclasses
import socket


class ModelInfoError(Exception):
    '''A workload or size model-info cannot build; the message says why.'''


@dataclasses.dataclass(frozen=True)
class Published:
    '''A parameter count published for a workload's model at one size,
    with its source: held in the workload's declaration
    (:attr:`hpctestlib_ml.registry.Workload.published`), printed by ``hpcml
    model-info``, listed on the fidelity page, and the model built is held
    to it by ``tests/test_model_info.py``.'''

    #: The parameters it counts.
    params: int
    #: Whose count it is and what it counts.
    whose: str
    #: Where it is published: a URL, or a paper's citation.
    source: str
    #: Whether the program builds this very model, so that the model built
    #: has exactly :attr:`params`; False for a count the model built is set
    #: beside (``hpcml model-info`` prints the difference).
    built: bool = True
    #: Forward FLOPs of one sample as the source publishes them, where it
    #: does (None where it does not).
    flops: float = None
    #: How the source counts :attr:`flops`: 2 FLOPs a multiply-add (the
    #: suite's), or 1 (torchvision's "GFLOPS", which count multiply-adds).
    flops_per_multiply_add: int = 2

    @property
    def forward_flops(self):
        ''':attr:`flops` in the suite's count (2 a multiply-add), or None.'''
        if self.flops is None:
            return None
        return self.flops * 2 / self.flops_per_multiply_add


@dataclasses.dataclass
class ModelInfo:
    workload: str
    size: str
    model: str                   # the program's name of the model
    params: int
    analytic_forward_flops: float
    measured_forward_flops: float = None
    measured_with: str = None    # how measured_forward_flops was counted
    device: str = 'cpu'          # where the model was built
    description: str = ''
    #: The counts published for this model (:class:`Published`), from its
    #: workload's declaration: its own, and those it is set beside.
    published_params: tuple = ()
    #: Where the model built departs from the published one, a line each.
    departures: tuple = ()

    @property
    def counts_beside(self):
        '''The published counts of another build of this model (those of
        :attr:`published_params` that it does not build).'''
        return tuple(p for p in self.published_params if not p.built)

    @property
    def flops_ratio(self):
        '''measured / analytic forward FLOPs, or None.'''
        if not self.measured_forward_flops or not self.analytic_forward_flops:
            return None
        return self.measured_forward_flops / self.analytic_forward_flops

    def as_dict(self):
        return {**dataclasses.asdict(self), 'flops_ratio': self.flops_ratio}


def count_params(model):
    '''Parameters of a torch module, each shared tensor once.'''
    return sum(p.numel() for p in model.parameters())


def measure_forward_flops(model, inputs):
    '''FLOPs of ``model(*inputs(device))`` by FlopCounterMode, counted on
    the ``meta`` device (the model is moved there).

    Why meta: there attention runs PyTorch's math kernels (bmm), which
    FlopCounterMode counts; on a CPU, scaled_dot_product_attention runs a
    fused flash kernel that it has no formula for, and without gradients
    ``nn.MultiheadAttention`` a fused inference kernel: both would drop the
    attention scores from the count. Gradients stay enabled, as in
    training; the model is in eval mode, so batch norm uses its running
    statistics on a batch of one.'''
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    model = model.to('meta').eval()
    with torch.device('meta'):
        args = inputs('meta')
        with FlopCounterMode(display=False) as counter:
            model(*args)
    return counter.get_total_flops()


#: Inside :func:`_measuring_activations`: a dict that :func:`torch_info`
#: puts the bytes one forward pass saves for the backward in ('bytes').
_ACTIVATIONS = contextvars.ContextVar('hpcml_activations', default=None)


@contextlib.contextmanager
def _measuring_activations():
    '''While a workload's builder runs: measure its model's saved tensors
    too (:func:`hpctestlib_ml.memory_estimate.saved_tensor_bytes`); yields
    the dict the figure lands in (no 'bytes' for TensorFlow).'''
    found = {}
    token = _ACTIVATIONS.set(found)
    try:
        yield found
    finally:
        _ACTIVATIONS.reset(token)


def torch_info(workload, size, name, model, inputs, analytic, device,
               description='', departures=()):
    '''The :class:`ModelInfo` of the torch *model*: its parameters, the
    *analytic* forward FLOPs per sample and the FLOPs measured on
    ``inputs(device)``; *departures* from the published model, where the
    workload knows them (its published counts are added by
    :func:`model_info`, from its declaration).'''
    params = count_params(model)
    found = _ACTIVATIONS.get()
    if found is not None:
        from hpctestlib_ml import memory_estimate
        found['bytes'] = memory_estimate.saved_tensor_bytes(model, inputs)
    return ModelInfo(
        workload=workload, size=size, model=name, params=params,
        analytic_forward_flops=analytic,
        measured_forward_flops=measure_forward_flops(model, inputs),
        measured_with='FlopCounterMode (meta device)', device=device,
        description=description, departures=departures)


@contextlib.contextmanager
def built_on(device):
    '''Build modules on *device* (``meta``: no memory, no initialisation).'''
    import torch
    with torch.device(device) if device == 'meta' else \
            contextlib.nullcontext():
        yield


@contextlib.contextmanager
def single_process_group():
    '''A one-process gloo group (Megatron-Core's layers need one).'''
    import torch.distributed as dist
    if dist.is_initialized():
        yield
        return
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}',
                            rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def named_size(size, check_sizes, key):
    '''The program's model name for *size*: a size of the check (``tiny``,
    ``benchmark``) or a model name the program takes directly.'''
    if size in check_sizes:
        return check_sizes[size][key]
    return size


def model_info(declared, size='benchmark', device=None):
    '''The :class:`ModelInfo` of the workload *declared* (its
    :class:`~hpctestlib_ml.registry.Workload`) at *size*, built by its own
    builder (``model_info``); *device* overrides where the model is built
    (default: ``meta`` for the large ones), with the counts the
    declaration publishes for that model (:func:`with_published`).'''
    if declared.model_info is None:
        raise ModelInfoError(f'{declared.name} declares no model builder')
    try:
        return with_published(declared, declared.model_info(size, device))
    except KeyError as err:
        raise ModelInfoError(f'{declared.name}: unknown size {size!r} '
                             f'({err})') from None


def with_published(declared, info):
    '''*info* with the counts the workload *declared* publishes for its
    model (:meth:`~hpctestlib_ml.registry.Workload.published_for`).'''
    return dataclasses.replace(
        info, published_params=declared.published_for(info.size, info.model))


def memory_info(declared, size='benchmark', layout=None, batch=None,
                precision=None):
    '''(ModelInfo, MemoryEstimate per device) of the workload *declared*
    at *size*: its own estimate where it declares one (Megatron's,
    analytic: *layout* (tp, pp, dp)), else parameters x the program's
    optimizer's bytes, and the activations one forward pass at batch 1
    saves for the backward, measured on the meta device, x *batch*
    (TensorFlow: activations not estimated).'''
    from hpctestlib_ml import memory_estimate as me
    if declared.memory_info:
        info, estimate = declared.memory_info(size, layout, batch, precision)
        return with_published(declared, info), estimate
    if layout is not None:
        raise ModelInfoError(
            f'{declared.name} trains data-parallel only, so --layout '
            f'{"x".join(map(str, layout))} changes nothing per device: drop '
            f'--layout (it is for workloads with tensor and pipeline '
            f'parallelism: megatron)')
    batch = batch or 1
    precision = precision or 'fp32'
    # TensorFlow builds no tensors on PyTorch's meta device.
    device = None if declared.framework == 'tensorflow' else 'meta'
    with _measuring_activations() as found:
        info = model_info(declared, size, device)
    measured = found.get('bytes')
    notes = [f'{declared.optimizer}, fp32 parameters (autocast mixed '
             f'precision keeps them fp32 too, with no master copy)']
    if measured is None:
        notes.append('activations not estimated (TensorFlow: no saved-'
                     'tensor measure)')
    else:
        notes.append('activations: tensors one forward pass at batch 1 '
                     'saves for the backward (meta device, fp32, no '
                     'gradient checkpointing: an upper bound under mixed '
                     'precision or checkpointing), x the batch')
    return info, me.generic_estimate(info.params, declared.optimizer,
                                     measured, batch, precision,
                                     assumptions=notes)


def format_info(info):
    '''Human-readable lines of *info*.'''
    lines = [f'{info.workload} {info.size} ({info.model}): '
             f'{info.description}',
             f'  parameters              {info.params:,}'
             + (' (the model built)' if info.published_params else '')]
    for i, count in enumerate(info.published_params):
        lines.append(f'  {"published" if not i else "":<24}'
                     f'{count.params:,}: {count.whose} ({count.source})'
                     + ('' if count.built else f'; the model built has '
                        f'{info.params - count.params:+,}'))
    for i, line in enumerate(info.departures):
        lines.append(f'  {"departs from it" if not i else "":<24}{line}')
    lines.append(f'  analytic forward FLOPs  '
                 f'{info.analytic_forward_flops:,.0f} per sample (MFU '
                 f'counts 3x per trained sample)')
    if info.measured_forward_flops:
        lines.append(f'  measured forward FLOPs  '
                     f'{info.measured_forward_flops:,.0f} by '
                     f'{info.measured_with}, '
                     f'{100 * (info.flops_ratio - 1):+.2f}% vs analytic')
    else:
        lines.append('  measured forward FLOPs  not measured')
    return '\n'.join(lines)
