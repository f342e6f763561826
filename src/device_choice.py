"""Which device a rank computes on, from what its node and launcher give
it: pure functions over plain values (the visibility variables, the local
rank, the device count the framework reports), so that the CPU tests can
feed them what a GPU node gives. Standard library only: the PyTorch
programs (:mod:`torch_device`) and TensorFlow's use them alike.

Where Slurm binds one GPU to each task (``--gpus-per-task``,
``--gpu-bind``, a site's default), a rank sees one device whatever its
local rank: it must use ordinal 0, not ``cuda:LOCAL_RANK`` ("invalid device
ordinal" on local ranks 1-3). Where every task sees all of the node's GPUs
(Slurm's default, torchrun), local rank *r* uses ordinal *r*.
"""
import os
import platform

#: Visibility variables, in the order the runtimes apply them: CUDA's, then
#: HIP's, then ROCr's (which the HIP runtime applies first, beneath HIP's).
VISIBILITY_VARIABLES = ('CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES',
                        'ROCR_VISIBLE_DEVICES')


class DeviceChoiceError(RuntimeError):
    '''A rank cannot be given a device of its own; the message says why.'''


def visibility(env):
    '''``NAME=value`` of the visibility variables set in *env*, for the
    log ('' where none is).'''
    return ' '.join(f'{name}={env[name]}' for name in VISIBILITY_VARIABLES
                    if name in env)


def local_world_size(env):
    '''Ranks on this node: torchrun's ``LOCAL_WORLD_SIZE``, else Slurm's
    tasks on this node (``SLURM_NTASKS_PER_NODE``, or the first count of
    ``SLURM_STEP_TASKS_PER_NODE``, e.g. ``4(x2)``); None if unknown.'''
    for name in ('LOCAL_WORLD_SIZE', 'SLURM_NTASKS_PER_NODE',
                 'SLURM_STEP_TASKS_PER_NODE'):
        value = env.get(name, '').split('(')[0].split(',')[0].strip()
        if value.isdigit():
            return int(value)
    return None


#: Slurm's GPUs of the step or job on this node: set where Slurm gave the
#: job GPUs, and so may have bound one to each task.
SLURM_GPU_VARIABLES = ('SLURM_STEP_GPUS', 'SLURM_JOB_GPUS')


def may_be_bound(env):
    '''Whether a launcher may have bound a device to each task, so that
    one device visible to each of several ranks can be a different one per
    rank: ranks started one per task (not torchrun's workers, which it
    marks with ``TORCHELASTIC_RUN_ID`` and forks from one task a node,
    every one seeing the task's devices) by Slurm with GPUs
    (:data:`SLURM_GPU_VARIABLES`: ``--gpus-per-task``, ``--gpu-bind`` or a
    site's wrapper binding them). Elsewhere (the local scheduler, a
    ``CUDA_VISIBLE_DEVICES`` the user exported) every rank sees the same
    device. (``LOCAL_WORLD_SIZE`` says nothing of this: torchrun sets it,
    and so does the suite's per_task job for its ranks.)'''
    return ('TORCHELASTIC_RUN_ID' not in env and
            any(env.get(name, '').strip() for name in SLURM_GPU_VARIABLES))


def device_index(local_rank, count, local_world=None, visible='',
                 bound=True):
    '''The ordinal, among the *count* devices this rank sees, that local
    rank *local_rank* of *local_world* uses.

    One device visible: 0 (a GPU bound to the task), where a launcher may
    have bound one to each task (*bound*: :func:`may_be_bound`) or the
    node runs one rank. As many as the node's ranks, or more: the local
    rank. Anything else would put two ranks on one device:
    DeviceChoiceError, naming what the rank saw (*visible*).
    '''
    seen = visible or 'no visibility variable set'
    if count < 1:
        raise DeviceChoiceError(f'no device visible to local rank '
                                f'{local_rank} ({seen})')
    if count == 1 and not bound and (local_world or 1) > 1:
        raise DeviceChoiceError(
            f'local rank {local_rank} sees 1 device ({seen}) and so do '
            f'the other {local_world - 1} ranks of this node (no launcher '
            f'bound a device to each): list {local_world} devices in the '
            f'visibility variable or unset it, or bind one GPU to each '
            f'task (srun --gpus-per-task=1)')
    if count == 1:
        return 0
    if local_rank < count and (local_world is None or local_world <= count):
        return local_rank
    ranks = f'{local_world} ranks' if local_world else 'its ranks'
    raise DeviceChoiceError(
        f'local rank {local_rank} sees {count} devices '
        f'({seen}) and this node runs '
        f'{ranks}: each rank must see either one device (Slurm '
        f'--gpus-per-task=1 or --gpu-bind) or all of the node\'s, one per '
        f'rank')


#: Compute capability from which NVIDIA GPUs have TF32 and bf16 tensor
#: cores (Ampere).
AMPERE = (8, 0)


def tf32_active(backend, capability, allowed, env):
    '''Whether fp32 matrix products run on TF32 tensor cores: an NVIDIA GPU
    of Ampere or later, the framework allowing it, and no
    ``NVIDIA_TF32_OVERRIDE=0`` (which turns TF32 off in cuBLAS and cuDNN
    whatever the framework says). AMD GPUs: False (their fp32 matrix rate
    is the ``fp32`` peak).'''
    return (backend == 'cuda' and tuple(capability or (0, 0)) >= AMPERE
            and bool(allowed) and env.get('NVIDIA_TF32_OVERRIDE') != '0')


def bf16_native(backend, capability):
    '''Whether the device computes bf16 in hardware: NVIDIA from Ampere on,
    AMD's CDNA2 and later (every ROCm device the suite runs on). Earlier
    NVIDIA GPUs (V100: 7.0) emulate it, many times slower, though
    ``torch.cuda.is_bf16_supported()`` says True.'''
    if backend == 'hip':
        return True
    return tuple(capability or (0, 0)) >= AMPERE


def cpu_device_fields():
    '''The fields of a ``device`` record that computes on the CPU (the
    same for every framework): the machine's CPUs, no GPU facts.'''
    return {'kind': 'cpu', 'backend': 'cpu', 'index': None,
            'count': os.cpu_count(),
            'name': platform.processor() or platform.machine(),
            'capability': None, 'tf32': False, 'nccl': None}
