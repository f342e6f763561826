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


def apply():
    '''Apply the patches if there is no GPU; True if applied.'''
    if torch.cuda.is_available():
        return False
    from megatron.core import utils
    from megatron.core.tensor_parallel import random
    utils.GlobalMemoryBuffer.get_tensor = _cpu_get_tensor
    random.CudaRNGStatesTracker.fork = _null_fork
    return True
