"""The size of a training run's checkpoint: what the storage component
writes and reads back, as the benchmark model's state.

A checkpoint holds the parameters and the optimizer's state. Counted here
in fp32, 4 bytes each: the parameters, and the optimizer's states per
parameter (:data:`~hpctestlib_ml.memory_estimate.OPTIMIZER_STATES`: Adam's
two moments; SGD with momentum's one) -- what ``torch.save`` of a PyTorch
program's ``model.state_dict()`` and ``optimizer.state_dict()`` writes,
12 bytes a parameter with Adam. (Megatron-LM's mixed-precision checkpoints
hold the fp16/bf16 weights beside their fp32 copies, 2 bytes more; the
gradients are not saved.) The parameter count is the registry's: the
workload's model builder (``hpcml model-info``), run once in a child
process, so that ReFrame never imports PyTorch or Megatron-Core, and
cached (:mod:`hpctestlib_ml.cache`).
"""
import json
import subprocess
import sys

from hpctestlib_ml import cache
from hpctestlib_ml.memory_estimate import OPTIMIZER_STATES
from hpctestlib_ml.parsers.failures import failure_line

#: Bytes of one stored value (fp32).
FP32 = 4


def state_bytes(params, optimizer):
    '''Bytes of *params* fp32 parameters and *optimizer*'s fp32 states.'''
    return params * FP32 * (1 + OPTIMIZER_STATES[optimizer])


class StateSizeError(ValueError):
    '''The model's size could not be found; the message says why.'''


def _params_in_child(workload, size):
    proc = subprocess.run(
        [sys.executable, '-m', 'hpctestlib_ml.cli', 'model-info', workload,
         '--size', size, '--json'], capture_output=True, text=True)
    if proc.returncode:
        # Its decisive line (the exception or the tool's own error), not
        # the stderr's last characters.
        raise StateSizeError(f'hpcml model-info {workload} --size {size} '
                             f'failed: {failure_line(proc.stderr)}')
    return json.loads(proc.stdout.strip().splitlines()[-1])['params']


def cached_params(workload, size, cache_dir):
    '''Parameters of *workload*'s model at *size*, from *cache_dir* or
    counted now by ``hpcml model-info`` in a child process.'''
    return cache.cached_value(cache_dir, 'model_params.json',
                              f'{workload}|{size}', 'params',
                              lambda: _params_in_child(workload, size))


def checkpoint_bytes(workload, size, cache_dir):
    '''(bytes, description) of the checkpoint of *workload*'s model at
    *size*, trained with its declared optimizer.'''
    from hpctestlib_ml import workloads
    declared = workloads.get(workload)
    if not declared.optimizer:
        raise StateSizeError(f'{workload} declares no optimizer')
    params = cached_params(workload, size, cache_dir)
    total = state_bytes(params, declared.optimizer)
    return total, (f'{workload} {size}: {params:,} parameters + '
                   f'{declared.optimizer} state, fp32')
