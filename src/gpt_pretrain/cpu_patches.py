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


class _CpuTorch:
    '''``torch`` for a module that assumes CUDA: ``"cuda"`` tensors are
    made on the CPU, ``torch.cuda.current_device()`` is the CPU and
    ``torch.cuda.synchronize()`` does nothing; everything else is torch.'''

    class _Cuda:
        def __getattr__(self, name):
            return getattr(torch.cuda, name)

        @staticmethod
        def current_device():
            return torch.device('cpu')

        @staticmethod
        def synchronize(*args, **kwargs):
            pass

    cuda = _Cuda()

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def zeros(*args, device=None, **kwargs):
        if str(device).startswith('cuda'):
            device = 'cpu'
        return torch.zeros(*args, device=device, **kwargs)


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


def apply():
    '''Apply the patches if there is no GPU; True if applied.'''
    if torch.cuda.is_available():
        return False
    from megatron.core import utils
    from megatron.core.tensor_parallel import random
    from megatron.core.models.common.embeddings import rotary_pos_embedding
    utils.GlobalMemoryBuffer.get_tensor = _cpu_get_tensor
    random.CudaRNGStatesTracker.fork = _null_fork
    from megatron.core.pipeline_parallel import p2p_communication, schedules
    rope = rotary_pos_embedding.RotaryEmbedding
    if not getattr(rope.get_emb, '_hpcml_cpu_patch', False):
        rope.get_emb = _keep_device(rope.get_emb)
        rope.get_emb._hpcml_cpu_patch = True
    schedules.torch = p2p_communication.torch = _CpuTorch()
    from megatron.core.models.common.language_module.language_module import \
        LanguageModule
    setup = LanguageModule.setup_embeddings_and_output_layer
    if not getattr(setup, '_hpcml_cpu_patch', False):
        LanguageModule.setup_embeddings_and_output_layer = \
            _tensors_stay(setup)
    return True
