"""What a size means for a case: pure functions, tested without ReFrame.

A workload's ``sizes`` map a size name (``tiny``, ``short``, ``benchmark``)
to defaults for the variables the user left unset, and a ``time_limit``.
:func:`resolve_size` turns the size asked for, the table, what the user
set and what the partition has into the values the case runs with, or a
:class:`~hpctestlib_ml.errors.BadInputError` naming the fix, or the reason
to skip the case.
"""
import dataclasses

from hpctestlib_ml.constants import GPU_FEATURE, SIZES
from hpctestlib_ml.errors import BadInputError, positive_int

#: Training steps of a ``tiny`` run where its size names none.
DEFAULT_STEPS = 8

#: What ``short`` changes of a workload's ``benchmark`` size: the
#: benchmark's model, per-device batch, precision and options for this many
#: steps (``-S steps=`` changes them), with a time limit to match. A
#: workload's ``sizes['short']`` changes this in turn (a None value removes
#: a benchmark setting, e.g. MMoCLIP's 3.2M samples).
SHORT_SIZE = {'steps': 100, 'time_limit': '1h'}


def size_table(sizes):
    '''*sizes* with ``short`` derived from ``benchmark``
    (:data:`SHORT_SIZE`, then the workload's own ``short`` entry).'''
    table = dict(sizes)
    if 'benchmark' in table:
        short = {**table['benchmark'], **SHORT_SIZE, **table.get('short', {})}
        table['short'] = {k: v for k, v in short.items() if v is not None}
    return table


def default_size(features):
    '''The size ``auto`` means on a partition with *features*:
    ``benchmark`` with the ``gpu`` feature, else ``tiny``.'''
    return 'benchmark' if GPU_FEATURE in features else 'tiny'


@dataclasses.dataclass(frozen=True)
class ResolvedSize:
    '''What :func:`resolve_size` decided.'''

    #: The size the case runs (never ``auto``).
    size: str
    #: Variable name -> value, for every variable the case runs with that
    #: the size decides (the user's own values included, checked).
    values: dict
    #: The size's time limit, where the user set none; else None.
    time_limit: str = None
    #: Why the case is skipped here, or None.
    skip: str = None
    #: The precision the size chose (None where the user asked for one):
    #: a size's bf16 may become fp16 on devices without bf16.
    sized_precision: str = None


#: The sizes for GPU partitions: on a partition without GPUs a case of
#: them is skipped with the reason unless ``-S steps=`` asks for it.
GPU_SIZES = ('short', 'benchmark')


def gpu_size_on_cpus(workload, size, values, fixed_work, partition):
    '''Why a case of *size* (:data:`GPU_SIZES`) is skipped on *partition*,
    which has no GPUs, and how to run it anyway.'''
    steps = (f' for {values["steps"]} steps' if values.get('steps')
             else '')
    what = ('the benchmark model' if size == 'short' else 'the benchmark')
    how = (f'ask for the steps (-S steps=N) and a batch that fits (-S '
           f'batch_size=N)' if size == 'short' or not fixed_work else
           f'run its model for N steps with --mode short -S steps=N '
           f'({fixed_work})')
    return (f'size {size} runs {what} of {workload} at its per-GPU batch '
            f'({values.get("batch_size")}){steps}: it is meant for GPU '
            f'partitions; to run it on {partition} anyway, {how}')


def resolve_size(workload, asked, table, auto_size, uses_gpus,
                 fixed_work=None, partition=''):
    '''The :class:`ResolvedSize` of a case of *workload*.

    *asked*: the variables the user may set (``size``, ``steps``,
    ``precision``, ``batch_size``, ``time_limit`` and the table's own
    names; None where unset). *table*: the workload's sizes with ``short``
    derived (:func:`size_table`). *auto_size*: what ``auto`` means on the
    partition (:func:`default_size`). *fixed_work*: why the benchmark's
    rules fix its amount of work, or None. Raises
    :class:`~hpctestlib_ml.errors.BadInputError` naming the fix.'''
    size = auto_size if asked['size'] == 'auto' else asked['size']
    if size not in SIZES or size not in table:
        known = ', '.join(s for s in SIZES if s == 'auto' or s in table)
        raise BadInputError(f'unknown size {asked["size"]!r} for {workload}:'
                            f' use -S size= one of {known}')
    if asked.get('steps') is not None and size == 'benchmark' and fixed_work:
        raise BadInputError(
            f'-S steps={asked["steps"]} at size benchmark: {fixed_work}, so '
            f'other steps would not be the benchmark; for {asked["steps"]} '
            f'steps of its model use --mode short (-S size=short)')
    values = {name: value for name, value in asked.items()
              if name not in ('size', 'time_limit')}
    time_limit = None
    for name, value in table[size].items():
        if name == 'time_limit':
            time_limit = value if asked.get('time_limit') is None else None
        elif values.get(name) is None:
            values[name] = value
    if size in GPU_SIZES and not uses_gpus and asked.get('steps') is None:
        return ResolvedSize(size, values, time_limit, skip=gpu_size_on_cpus(
            workload, size, values, fixed_work, partition))
    if values.get('precision') is None or (
            not uses_gpus and asked.get('precision') is None):
        # The sizes' mixed precisions are for GPUs; CPUs train fp32
        # unless -S precision= says otherwise.
        values['precision'] = 'fp32'
    values['batch_size'] = positive_int('batch_size', values.get('batch_size'))
    # The first logged step is warm-up: steady state needs two.
    values['steps'] = positive_int(
        'steps', DEFAULT_STEPS if values.get('steps') is None
        else values['steps'], minimum=2)
    return ResolvedSize(
        size, values, time_limit,
        sized_precision=None if asked.get('precision') else
        values['precision'])
