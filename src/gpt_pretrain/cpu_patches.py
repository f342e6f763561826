"""Patches that let Megatron-Core 0.16 train on CPUs (gloo), applied only
when no GPU is present. Each is a CUDA assumption in code that is otherwise
device-agnostic; nothing here changes what is computed.

1. ``GlobalMemoryBuffer.get_tensor`` allocates its scratch buffer with
   ``device=torch.cuda.current_device()``, which fails without CUDA; the
   patched version allocates on the CPU.
2. ``CudaRNGStatesTracker.fork`` switches CUDA RNG states for
   tensor-parallel dropout and init; without CUDA there is no state to
   switch, so it becomes a null context (the CPU generator is used).
   ``model_parallel_cuda_manual_seed`` is skipped for the same reason: the
   caller seeds torch's CPU generator instead.
3. ``RotaryEmbedding.get_emb`` (``--position-embedding-type rope``, as
   CARAML runs) moves its frequencies to ``torch.cuda.current_device()`` on
   first use; the patched version leaves them where the model is.
4. The pipeline schedules (``megatron.core.pipeline_parallel.schedules``)
   count tokens in ``torch.zeros(..., device="cuda")``, and the stages'
   point-to-point communication (``p2p_communication``) allocates its
   receive buffers on ``torch.cuda.current_device()`` and calls
   ``torch.cuda.synchronize()``; those modules see a ``torch`` whose
   ``"cuda"`` tensors are made on the CPU, whose current CUDA device is the
   CPU and whose synchronisation is a no-op (gloo's send/receive are
   synchronous where they are waited for).
5. ``LanguageModule.setup_embeddings_and_output_layer`` moves the tied
   embedding weight with ``.cuda()`` before it all-reduces it between the
   first and last pipeline stage; during that call ``Tensor.cuda`` leaves
   a tensor where it is.
6. Megatron-Core's tensor-parallel layers and their sequence-parallel
   gathers and scatters, its data-parallel wrapper, contiguous parameter
   and gradient buffers, optimizers (fp32 main weights, the distributed
   optimizer), loss scaler, gradient clipping and ``finalize_model_grads``
   see the same ``torch`` as in 4 (also: ``torch.cuda.Stream``,
   ``stream`` and ``empty_cache`` do nothing); while the optimizer is
   built and steps (:func:`cuda_type_names`), ``Tensor.type()`` names CPU
   tensors as their CUDA types, which is what its dtype checks and
   gradient clipping's assertion compare against.
7. Activation recomputation (``tensor_parallel.checkpoint``, selective
   recomputation of core attention) saves and restores the CUDA RNG state
   besides the CPU one; without CUDA there is none to save: the CPU
   generator's state, which dropout on the CPU draws from, is restored.
"""
import contextlib
import functools
import operator

import torch


def _cpu_get_tensor(self, tensor_shape, dtype, name, mem_alloc_context=None):
    required = functools.reduce(operator.mul, tensor_shape, 1)
    key = (name, dtype)
    if key not in self.buffer or self.buffer[key].numel() < required:
        self.buffer[key] = torch.empty(required, dtype=dtype,
                                       requires_grad=False)
    return self.buffer[key][0:required].view(*tensor_shape)


@contextlib.contextmanager
def _null_fork(self, name=None):
    yield


def _keep_device(get_emb):
    @functools.wraps(get_emb)
    def patched(self, *args, **kwargs):
        # get_emb moves inv_freq to the current CUDA device when it is on
        # the CPU; with no CUDA, "current device" is where it already is.
        current_device = torch.cuda.current_device
        torch.cuda.current_device = lambda: self.inv_freq.device
        try:
            return get_emb(self, *args, **kwargs)
        finally:
            torch.cuda.current_device = current_device
    return patched


class _NoStream:
    '''A CUDA stream where there is none: waits and syncs do nothing.'''

    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass


#: torch's tensor factories that take a ``device``.
_FACTORIES = ('zeros', 'empty', 'ones', 'full', 'tensor', 'arange',
              'zeros_like', 'empty_like', 'ones_like')


class _CpuTorch:
    '''``torch`` for a module that assumes CUDA: ``"cuda"`` tensors are
    made on the CPU, ``torch.cuda.current_device()`` is the CPU,
    synchronisation, streams and the cache do nothing; everything else is
    torch.'''

    class _Cuda:
        Stream = _NoStream

        def __getattr__(self, name):
            return getattr(torch.cuda, name)

        @staticmethod
        def current_device():
            return torch.device('cpu')

        @staticmethod
        def synchronize(*args, **kwargs):
            pass

        @staticmethod
        def empty_cache():
            pass

        @staticmethod
        def stream(stream):
            return contextlib.nullcontext()

        @staticmethod
        def default_stream(*args, **kwargs):
            return _NoStream()

        current_stream = default_stream

    cuda = _Cuda()

    def __getattr__(self, name):
        attr = getattr(torch, name)
        if name not in _FACTORIES:
            return attr

        def on_cpu(*args, device=None, **kwargs):
            if str(device).startswith('cuda'):
                device = 'cpu'
            return attr(*args, device=device, **kwargs)
        return on_cpu


#: Megatron-Core modules that see :class:`_CpuTorch` (patches 4 and 6).
_CUDA_MODULES = (
    'megatron.core.pipeline_parallel.schedules',
    'megatron.core.pipeline_parallel.p2p_communication',
    'megatron.core.tensor_parallel.mappings',
    'megatron.core.tensor_parallel.layers',
    'megatron.core.distributed.param_and_grad_buffer',
    'megatron.core.distributed.distributed_data_parallel',
    'megatron.core.distributed.finalize_model_grads',
    'megatron.core.optimizer.optimizer',
    'megatron.core.optimizer.distrib_optimizer',
    'megatron.core.optimizer.grad_scaler',
    'megatron.core.optimizer.clip_grads',
    'megatron.core.utils',
)


@contextlib.contextmanager
def cuda_type_names():
    '''While the optimizer is built or steps without CUDA: ``Tensor.type()``
    answers ``torch.cuda.HalfTensor`` for a CPU half tensor (and so on),
    the names Megatron-Core's optimizers check parameters against. A no-op
    where CUDA is present.'''
    if torch.cuda.is_available():
        yield
        return
    original = torch.Tensor.type

    def type_(tensor, *args, **kwargs):
        name = original(tensor, *args, **kwargs)
        if (not args and not kwargs and isinstance(name, str) and
                name.startswith('torch.') and
                not name.startswith('torch.cuda.')):
            return 'torch.cuda.' + name[len('torch.'):]
        return name
    torch.Tensor.type = type_
    try:
        yield
    finally:
        torch.Tensor.type = original


def _tensors_stay(method):
    @functools.wraps(method)
    def patched(*args, **kwargs):
        cuda = torch.Tensor.cuda
        torch.Tensor.cuda = lambda tensor, *a, **k: tensor
        try:
            return method(*args, **kwargs)
        finally:
            torch.Tensor.cuda = cuda
    patched._hpcml_cpu_patch = True
    return patched


def _device_free_targets():
    '''(owner, attribute, replacement) of patches 1-3: what a model built
    and run without CUDA needs.'''
    from megatron.core import utils
    from megatron.core.tensor_parallel import random
    from megatron.core.models.common.embeddings import rotary_pos_embedding
    rope = rotary_pos_embedding.RotaryEmbedding
    get_emb = rope.get_emb
    if not getattr(get_emb, '_hpcml_cpu_patch', False):
        get_emb = _keep_device(get_emb)
        get_emb._hpcml_cpu_patch = True
    return ((utils.GlobalMemoryBuffer, 'get_tensor', _cpu_get_tensor),
            (random.CudaRNGStatesTracker, 'fork', _null_fork),
            (rope, 'get_emb', get_emb))


@contextlib.contextmanager
def device_free():
    '''Patches 1-3 while a model is built and run on the ``meta`` device
    (``hpcml model-info``), on any node, GPU or not, undone after. A meta
    model holds no values: its dropout draws no random numbers, so there
    is no CUDA RNG state to fork (on a GPU node Megatron-Core's tracker
    is unseeded there and refuses: "cuda rng state model-parallel-rng is
    not added"), and its scratch buffers and RoPE table stay on the meta
    device rather than creating a CUDA context on a login node.'''
    targets = _device_free_targets()
    saved = [(owner, name, owner.__dict__[name])
             for owner, name, _ in targets]
    for owner, name, replacement in targets:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def apply():
    '''Apply the patches if there is no GPU; True if applied.'''
    if torch.cuda.is_available():
        return False
    from megatron.core.tensor_parallel import random
    for owner, name, replacement in _device_free_targets():
        setattr(owner, name, replacement)
    import importlib
    cpu_torch = _CpuTorch()
    for name in _CUDA_MODULES:
        importlib.import_module(name).torch = cpu_torch
    random._get_cuda_rng_state = lambda *args, **kwargs: torch.empty(0)
    random._set_cuda_rng_state = lambda *args, **kwargs: None
    from megatron.core.models.common.language_module.language_module import \
        LanguageModule
    setup = LanguageModule.setup_embeddings_and_output_layer
    if not getattr(setup, '_hpcml_cpu_patch', False):
        LanguageModule.setup_embeddings_and_output_layer = \
            _tensors_stay(setup)
    return True
