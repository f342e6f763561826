"""Which of a node's GPUs a case's energy counts, from the environment a
task gets on the node: pure, standard library only (the energy sampler,
``src/energy_sampler.py``, runs it in the node's first task).

In order:

1. Slurm's GPUs of the step on this node, ``SLURM_STEP_GPUS`` (set by
   slurmstepd for each step, per node), else the job's, ``SLURM_JOB_GPUS``.
   These are Slurm's *global* GPU ids: the node's GPUs numbered in the order
   of their device files' numbers (slurmd sorts its gres/gpu records by the
   number at the end of ``File=``, ``/dev/nvidia<minor>``), whatever
   CUDA_VISIBLE_DEVICES a task was given; so a task bound to one GPU still
   finds all of the step's GPUs on its node here.
2. The visibility variables (the ids as the task's runtime sees them):
   ``CUDA_VISIBLE_DEVICES`` on NVIDIA; on AMD ``ROCR_VISIBLE_DEVICES`` (the
   physical devices) and, within those, ``HIP_VISIBLE_DEVICES`` (or
   ``CUDA_VISIBLE_DEVICES``, which HIP also reads).
3. The first ``HPCML_GPUS_PER_NODE`` devices (the check exports the case's
   GPUs per node in every job: on a box with 8 GPUs the local scheduler's
   1-GPU case counts one, not eight).
4. All of the node's devices.

Where ``HPCML_GPUS_PER_NODE`` is set, a list longer than it is cut to its
first ``HPCML_GPUS_PER_NODE`` ids: the case's ranks use the first devices
they see (``device_choice.device_index``), and ``0`` counts no GPU (a CPU
case on a GPU node).
"""
import dataclasses
import re

SLURM_VARIABLES = ('SLURM_STEP_GPUS', 'SLURM_JOB_GPUS')
GPUS_PER_NODE = 'HPCML_GPUS_PER_NODE'
#: A device the runtimes name by UUID (``GPU-8f6c...``, ``MIG-...``).
_UUID = re.compile(r'(GPU|MIG)-[0-9A-Fa-f-]+')


class NodeGpusError(ValueError):
    '''The environment names GPUs in a form this cannot read; the message
    says which variable and how to fix it.'''


@dataclasses.dataclass(frozen=True)
class Counted:
    '''The GPUs a node's energy counts.

    ``ids``: tuple of ids (str), or None for all of the node's devices.
    ``match``: what the ids are: ``slurm`` (Slurm's global ids: the device
    file's number, NVML's minor number), ``visible`` (the runtime's
    ordinals or UUIDs, as a task sees them), ``first`` (ordinals
    ``0..n-1``), ``all``. ``source``: where they came from, for messages.
    '''
    ids: tuple
    match: str
    source: str


def _slurm_ids(name, value):
    ids = []
    for item in value.split(','):
        item = item.strip()
        if re.fullmatch(r'\d+', item):
            ids.append(str(int(item)))
        elif re.fullmatch(r'\d+-\d+', item):
            low, high = (int(x) for x in item.split('-'))
            ids += [str(i) for i in range(low, high + 1)]
        else:
            raise NodeGpusError(
                f'{name}={value!r}: expected a comma list of GPU indices '
                f'(e.g. 0,1,2,3); fix the job\'s GPU request (--gres=gpu:N)')
    return ids


def _visible_ids(value):
    '''The ids of a visibility variable as the CUDA and HIP runtimes read
    it: a comma list of ordinals or UUIDs, read up to the first entry that
    is neither (``-1``, ``NoDevFiles``): the runtime ignores the rest.'''
    ids = []
    for item in value.split(','):
        item = item.strip()
        if re.fullmatch(r'\d+', item):
            ids.append(str(int(item)))
        elif _UUID.fullmatch(item):
            ids.append(item)
        else:
            break
    return ids


def _amd_visible(env):
    '''(ids, source) from ROCR's and HIP's variables, or None.'''
    rocr = env.get('ROCR_VISIBLE_DEVICES')
    hip_name = next((n for n in ('HIP_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES')
                     if n in env), None)
    if rocr is None and hip_name is None:
        return None
    outer = _visible_ids(rocr) if rocr is not None else None
    inner = _visible_ids(env[hip_name]) if hip_name else None
    if outer is None:
        return inner, f'{hip_name}={env[hip_name]}'
    if inner is None:
        return outer, f'ROCR_VISIBLE_DEVICES={rocr}'
    ids = []
    for i in inner:                  # HIP's ordinals index ROCr's list
        if not i.isdigit():
            raise NodeGpusError(
                f'{hip_name}={env[hip_name]!r} names a UUID within '
                f'ROCR_VISIBLE_DEVICES={rocr!r}: give HIP ordinals, or set '
                f'one of the two only')
        if int(i) < len(outer):
            ids.append(outer[int(i)])
    return ids, f'ROCR_VISIBLE_DEVICES={rocr} {hip_name}={env[hip_name]}'


def visible_ids(env, vendor='nvidia'):
    '''(ids, source) of the devices the visibility variables in *env* let
    the runtime see (ordinals or UUIDs, as the runtime reads them: ``()``
    where they hide every device), or None where none is set.'''
    if vendor == 'amd':
        return _amd_visible(env)
    if 'CUDA_VISIBLE_DEVICES' in env:
        return (_visible_ids(env['CUDA_VISIBLE_DEVICES']),
                f'CUDA_VISIBLE_DEVICES={env["CUDA_VISIBLE_DEVICES"]}')
    return None


def gpus_per_node(env):
    '''``HPCML_GPUS_PER_NODE`` as an int, or None where unset.'''
    value = env.get(GPUS_PER_NODE, '').strip()
    if not value:
        return None
    if not value.isdigit():
        raise NodeGpusError(f'{GPUS_PER_NODE}={value!r}: expected the '
                            f'case\'s GPUs per node, an integer >= 0')
    return int(value)


def counted_gpus(env, vendor='nvidia'):
    '''The :class:`Counted` GPUs of this node for a job whose task has the
    environment *env* (a mapping); *vendor* ``nvidia`` or ``amd`` (which
    visibility variables apply).'''
    limit = gpus_per_node(env)
    found = None
    for name in SLURM_VARIABLES:
        if env.get(name, '').strip():
            found = (_slurm_ids(name, env[name]), 'slurm',
                     f'{name}={env[name]}')
            break
    if found is None:
        visible = visible_ids(env, vendor)
        if visible is not None:
            found = (visible[0], 'visible', visible[1])
    if found is None:
        if limit is None:
            return Counted(None, 'all', 'all of the node\'s GPUs')
        return Counted(tuple(str(i) for i in range(limit)), 'first',
                       f'{GPUS_PER_NODE}={limit}')
    ids, match, source = found
    if limit is not None and len(ids) > limit:
        ids = ids[:limit]
        source += f', first {limit} ({GPUS_PER_NODE})'
    return Counted(tuple(ids), match, source)
