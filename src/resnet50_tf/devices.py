"""The one GPU a TensorFlow worker trains on, and the suite's records of it
(``[hpcml] device`` and ``memory``, :mod:`hpcml_log`).

MultiWorkerMirroredStrategy makes each worker a replica on every GPU the
worker sees, and TensorFlow reserves nearly all the memory of each: with
Slurm's default (every task sees the node's GPUs) and always under
torchrun, four workers on a 4-GPU node would be 16 replicas, or fail out of
memory at start-up. So before the strategy exists each worker keeps one
GPU visible, chosen as the PyTorch programs choose theirs
(:func:`device_choice.device_index`: the local rank where the worker sees
the node's GPUs, 0 where one GPU is bound to its task), and lets its memory
grow instead of reserving it.
"""
import ctypes

import device_choice


def choose_gpu(gpus, env):
    '''``(index, gpu)``: the one of *gpus* (what
    ``tf.config.list_physical_devices('GPU')`` lists) that this worker
    uses, by ``LOCAL_RANK`` (torchrun's, or ``src/task_env.sh``'s in
    per_task mode) and the node's ranks in *env*; None where it sees no
    GPU. Raises device_choice.DeviceChoiceError where it cannot have one
    of its own.'''
    if not gpus:
        return None
    index = device_choice.device_index(
        int(env.get('LOCAL_RANK') or 0), len(gpus),
        device_choice.local_world_size(env), device_choice.visibility(env),
        device_choice.may_be_bound(env))
    return index, gpus[index]


def use_one_gpu(tf, env):
    '''Make TensorFlow see only this worker's GPU, its memory growing as
    used (call before anything starts TensorFlow's runtime). Returns
    ``(gpus, chosen)``: every GPU the worker saw, and :func:`choose_gpu`'s
    answer.'''
    gpus = tf.config.list_physical_devices('GPU')
    chosen = choose_gpu(gpus, env)
    if chosen is not None:
        gpu = chosen[1]
        tf.config.set_visible_devices([gpu], 'GPU')
        tf.config.experimental.set_memory_growth(gpu, True)
    return gpus, chosen


def build_backend(build_info):
    '''``cuda``, ``hip`` or None (a CPU-only build), from
    ``tf.sysconfig.get_build_info()``.'''
    if build_info.get('is_cuda_build'):
        return 'cuda'
    if build_info.get('is_rocm_build'):
        return 'hip'
    return None


def build_runtime(build_info):
    '''The GPU runtime TensorFlow was built with (``cuda 12.5.1``,
    ``rocm 6.2``), None for a CPU-only build.'''
    backend = build_backend(build_info)
    version = build_info.get({'cuda': 'cuda_version',
                              'hip': 'rocm_version'}.get(backend, ''))
    return f'{"rocm" if backend == "hip" else backend} {version}' \
        if backend and version else None


def capability_text(details):
    '''``8.0`` from ``get_device_details``' ``compute_capability``
    tuple, None where absent (AMD GPUs).'''
    capability = details.get('compute_capability')
    return '.'.join(str(c) for c in capability) if capability else None


def device_record(tf, env, rank, local_rank, gpus, chosen):
    '''The fields of this worker's ``[hpcml] device`` record.'''
    framework = f'tensorflow {tf.__version__}'
    visible = device_choice.visibility(env)
    if chosen is None:
        return dict(rank=rank, local_rank=local_rank, runtime=None,
                    framework=framework, visible=visible,
                    **device_choice.cpu_device_fields())
    index, gpu = chosen
    build_info = dict(tf.sysconfig.get_build_info())
    backend = build_backend(build_info)
    details = tf.config.experimental.get_device_details(gpu)
    return dict(
        rank=rank, local_rank=local_rank, kind='gpu', backend=backend,
        index=index, count=len(gpus), name=details.get('device_name'),
        capability=capability_text(details),
        tf32=device_choice.tf32_active(
            backend, details.get('compute_capability'),
            tf.config.experimental.tensor_float_32_execution_enabled(),
            env),
        runtime=build_runtime(build_info), framework=framework, nccl=None,
        visible=visible)


def total_memory_bytes(backend, ordinal):
    '''The capacity of GPU *ordinal* (among those the runtime sees, as
    TensorFlow numbers its physical GPUs), from the driver
    (``cuDeviceTotalMem``) or HIP (``hipDeviceTotalMem``), which
    TensorFlow does not report; None where the library is not there.'''
    size = ctypes.c_size_t()
    try:
        if backend == 'cuda':
            cuda = ctypes.CDLL('libcuda.so.1')
            device = ctypes.c_int()
            failed = (cuda.cuInit(0)
                      or cuda.cuDeviceGet(ctypes.byref(device), ordinal)
                      or cuda.cuDeviceTotalMem_v2(ctypes.byref(size), device))
        elif backend == 'hip':
            hip = ctypes.CDLL('libamdhip64.so')
            failed = hip.hipDeviceTotalMem(ctypes.byref(size), ordinal)
        else:
            return None
    except (OSError, AttributeError):
        return None
    return None if failed else size.value


def memory_record(tf, rank, backend, ordinal):
    '''The fields of this worker's ``[hpcml] memory`` record (its GPU is
    TensorFlow's ``GPU:0``, the only one it sees); TensorFlow's
    allocator does not say what it holds beyond its live tensors, so
    ``peak_reserved_MiB`` is None.'''
    peak = tf.config.experimental.get_memory_info('GPU:0')['peak']
    total = total_memory_bytes(backend, ordinal)
    return dict(rank=rank, peak_allocated_MiB=round(peak / 2**20, 1),
                peak_reserved_MiB=None,
                total_MiB=None if total is None else round(total / 2**20, 1))
