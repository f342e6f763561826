"""A PyTorch rank's device, its math mode, and the records that say what
ran (:mod:`hpcml_log`): what every PyTorch program of the suite does the
same way.

- :func:`select_device`: the rank's GPU by :func:`device_choice.
  device_index` (ordinal 0 where Slurm bound one GPU to the task, the
  local rank where the task sees them all), made current; the CPU only
  where the job expects none. A job that expects a GPU (the check exports
  ``HPCML_DEVICE_KIND=gpu``) and finds none (a CUDA build of torch on an
  older driver, a container started without ``--nv``) stops at once with
  the reason instead of training on the CPU.
- :func:`set_math_mode`: TF32 for fp32 matrix products and convolutions
  on GPUs that have it, stated explicitly (PyTorch's own default for
  matrix products is IEEE fp32, OpenCLIP turns TF32 on, TensorFlow has it
  on): the ``device`` record says which ran, and MFU divides by that peak.
  cuDNN picks its fastest convolution algorithms (``cudnn.benchmark``, as
  the MLPerf references do; the first step, which pays for the search, is
  not timed).
- :func:`emit_device`, :func:`emit_memory`: the ``device`` and ``memory``
  records (fields: :mod:`hpctestlib_ml.parsers.hpcml_records`).
- :func:`end_warmup`: after the untimed first step, the memory peaks
  restart, so that the ``memory`` record's peaks are those of the timed
  steps: the first step's cuDNN autotuning tries workspaces as large as
  the free memory (DeepLabV3+ in fp32 on an H200: a 140,366 MiB peak in
  the first step, 12,069 MiB in ``nvidia-smi`` over the timed steps;
  ``bench/results/gpuval-h200-2026-11-26``). The first step's peak stays
  in the record as ``first_step_peak_reserved_MiB``.
"""
import datetime
import os
import sys

import torch

import device_choice
import heartbeat
import hpcml_log

#: Set by the check: ``gpu`` where the partition has GPUs, else ``cpu``.
EXPECTED_KIND = 'HPCML_DEVICE_KIND'


def backend():
    '''``hip`` for a ROCm build of torch, ``cuda`` otherwise.'''
    return 'hip' if getattr(torch.version, 'hip', None) else 'cuda'


def runtime():
    '''The GPU runtime torch was built with (``cuda 12.8``, ``hip 6.2``),
    or ``none`` for a CPU-only build.'''
    if getattr(torch.version, 'hip', None):
        return f'hip {torch.version.hip}'
    if torch.version.cuda:
        return f'cuda {torch.version.cuda}'
    return 'none'


def why_no_gpu():
    '''Why torch sees no GPU, in its own words where it has them.'''
    if runtime() == 'none':
        return f'torch {torch.__version__} is a CPU-only build'
    try:
        torch.cuda.init()
    except Exception as err:                 # torch's reason, e.g. the driver
        reason = str(err).strip().splitlines()[0]
    else:
        reason = 'torch.cuda.is_available() is False'
    return (f'torch {torch.__version__} (built for {runtime()}) sees no GPU: '
            f'{reason}')


def select_device(env=None, make_current=True):
    '''This rank's device, made current unless *make_current* is False
    (see the module docstring).'''
    env = os.environ if env is None else env
    if torch.cuda.is_available():
        index = device_choice.device_index(
            int(env.get('LOCAL_RANK', 0)), torch.cuda.device_count(),
            device_choice.local_world_size(env),
            device_choice.visibility(env),
            device_choice.may_be_bound(env))
        if make_current:
            torch.cuda.set_device(index)
        return torch.device('cuda', index)
    if env.get(EXPECTED_KIND) == 'gpu':
        raise device_choice.DeviceChoiceError(
            f'this job expects a GPU, but {why_no_gpu()}: install a torch '
            f'built for the node\'s driver, or start the container with '
            f'its GPU option (apptainer --nv / --rocm)')
    return torch.device('cpu')


def select_device_or_exit(env=None, make_current=True):
    ''':func:`select_device`, or exit with its reason in one line
    (``hpcml: error: ...``, which the check's failure reason quotes).'''
    try:
        return select_device(env, make_current)
    except device_choice.DeviceChoiceError as err:
        sys.exit(f'hpcml: error: {err}')


#: The job's variable: seconds a rank waits in a collective before it
#: fails (a stalled peer), for every backend; unset: torch's defaults (10
#: minutes for NCCL, 30 for Gloo), so that a stalled rank holds the job
#: until then or its time limit. Set it in the partition's ``env_vars``.
COLLECTIVE_TIMEOUT = 'HPCML_COLLECTIVE_TIMEOUT_S'


def collective_timeout(env=None):
    ''':data:`COLLECTIVE_TIMEOUT` as a timedelta, or None where unset;
    exits with the fix where it is not a number of seconds > 0.'''
    value = (os.environ if env is None else env).get(COLLECTIVE_TIMEOUT, '')
    if not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0
    if not seconds > 0:
        sys.exit(f'hpcml: error: {COLLECTIVE_TIMEOUT} must be a number of '
                 f'seconds > 0, got {value!r}: fix it where the job gets it '
                 f"(the partition's env_vars)")
    return datetime.timedelta(seconds=seconds)


def init_process_group(backend, env=None, **kwargs):
    '''torch.distributed's process group of *backend* from the launcher's
    env:// variables, with :func:`collective_timeout` where set.'''
    import torch.distributed as dist
    timeout = collective_timeout(env)
    if timeout is not None:
        kwargs['timeout'] = timeout
    dist.init_process_group(backend, **kwargs)


def start_ranks(cpu=False, math_mode=True, env=None, bf16=False,
                computes=True):
    '''(rank, world size, device) of this process: its device
    (:func:`select_device_or_exit`, or the CPU where *cpu*; where *bf16*,
    the run's precision is a bf16 one and an emulating device exits:
    :func:`refuse_emulated_bf16`), the process
    group from the launcher's env:// variables where ``WORLD_SIZE`` > 1
    (NCCL on GPUs, Gloo on CPUs), the math mode (:func:`set_math_mode`,
    unless *math_mode* is False: a program that sets its own) and its
    ``device`` record. *computes* False: a program that computes nothing
    on the device (Storage, whose collectives are barriers): Gloo on every
    device, and the device chosen for the record but not made current,
    so that no rank pays NCCL's set-up or a CUDA context.'''
    import torch.distributed as dist
    env = os.environ if env is None else env
    world = int(env.get('WORLD_SIZE', 1))
    device = (torch.device('cpu') if cpu else
              select_device_or_exit(env, make_current=computes))
    refuse_emulated_bf16(device, bf16)
    rank = 0
    if world > 1:
        init_process_group('nccl' if device.type == 'cuda' and computes
                           else 'gloo', env)
        rank = dist.get_rank()
    if math_mode and computes:
        set_math_mode(device)
    emit_device(device, rank)
    return rank, world, device


def end_ranks(device, rank):
    '''At the end of a program started by :func:`start_ranks`: the rank's
    ``memory`` record (GPUs), and the process group closed where there
    is one.'''
    import torch.distributed as dist
    emit_memory(device, rank)
    if dist.is_initialized():
        dist.destroy_process_group()


def refuse_emulated_bf16(device, bf16):
    '''Exit with the reason where *bf16* (the run's precision is a bf16
    one) would run emulated on *device* (V100 and older: torch says bf16
    is supported and runs it many times slower).'''
    if bf16 and device.type == 'cuda' and not device_choice.bf16_native(
            backend(), capability(device)):
        sys.exit(f'hpcml: error: {torch.cuda.get_device_name(device)} '
                 f'(capability {".".join(map(str, capability(device)))}) '
                 f'has no bf16 hardware; run fp16 instead '
                 f'(-S precision=fp16, or amp for OpenCLIP)')


def capability(device):
    return (torch.cuda.get_device_capability(device)
            if device.type == 'cuda' else None)


def set_math_mode(device):
    '''TF32 and cuDNN autotuning on GPUs (module docstring); whether fp32
    matrix products now run on TF32.'''
    if device.type != 'cuda':
        return False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    return tf32_active(device)


def tf32_active(device):
    return device.type == 'cuda' and device_choice.tf32_active(
        backend(), capability(device),
        torch.backends.cuda.matmul.allow_tf32, os.environ)


def nccl_version():
    try:
        version = torch.cuda.nccl.version()
    except Exception:                         # no NCCL in this build
        return None
    if isinstance(version, tuple):
        return '.'.join(map(str, version))
    return str(version)


def device_facts(device, rank, env=None):
    '''The fields of the ``device`` record of *rank* on *device*.'''
    env = os.environ if env is None else env
    facts = {'rank': rank, 'local_rank': int(env.get('LOCAL_RANK', 0)),
             'framework': f'torch {torch.__version__}',
             'runtime': runtime(),
             'visible': device_choice.visibility(env)}
    if device.type != 'cuda':
        return {**facts, **device_choice.cpu_device_fields()}
    major, minor = capability(device)
    return {**facts, 'kind': 'gpu', 'backend': backend(),
            'index': device.index, 'count': torch.cuda.device_count(),
            'name': torch.cuda.get_device_name(device),
            'capability': f'{major}.{minor}', 'tf32': tf32_active(device),
            'nccl': nccl_version()}


def emit_device(device, rank):
    '''The rank's ``device`` record. Every PyTorch program says where
    it runs before it trains: from then on its optimizer steps and
    DataLoader batches are its heartbeat for the hang watch
    (:func:`heartbeat.watch_torch`).'''
    hpcml_log.emit('device', **device_facts(device, rank))
    heartbeat.watch_torch()


_MIB = 2 ** 20

#: device -> the first step's peak reserved MiB, once :func:`end_warmup`
#: has restarted that device's peaks.
_FIRST_STEP_PEAK = {}


def end_warmup(device):
    '''Restart *device*'s memory peaks after the untimed first step,
    keeping that step's peak for the ``memory`` record (nothing on the
    CPU). Call it once, after the first step has finished on the device
    (the programs synchronize there to time the step).'''
    if device.type != 'cuda':
        return
    _FIRST_STEP_PEAK[str(device)] = round(
        torch.cuda.max_memory_reserved(device) / _MIB, 1)
    torch.cuda.reset_peak_memory_stats(device)


def memory_facts(device, rank):
    '''The fields of the ``memory`` record; None on the CPU (no record:
    absent, not zero). ``peaks_over`` says which steps the peaks cover:
    ``timed`` after :func:`end_warmup`, else ``run`` (every step, the
    first one's autotuning included: OpenCLIP's loop, which the suite
    does not enter).'''
    if device.type != 'cuda':
        return None
    facts = {'rank': rank,
             'peak_allocated_MiB': round(
                 torch.cuda.max_memory_allocated(device) / _MIB, 1),
             'peak_reserved_MiB': round(
                 torch.cuda.max_memory_reserved(device) / _MIB, 1),
             'total_MiB': round(
                 torch.cuda.get_device_properties(device).total_memory /
                 _MIB, 1)}
    first = _FIRST_STEP_PEAK.get(str(device))
    facts['peaks_over'] = 'run' if first is None else 'timed'
    if first is not None:
        facts['first_step_peak_reserved_MiB'] = first
    return facts


def emit_memory(device, rank):
    facts = memory_facts(device, rank)
    if facts:
        hpcml_log.emit('memory', **facts)
