"""Turn a scale and a partition's facts into a job layout, or a reason it cannot run.

Pure functions over plain values, so they are tested without ReFrame;
:mod:`hpctestlib_ml.plugins.placement` feeds them the partition's configuration.
"""
import dataclasses

from hpctestlib_ml.constants import LAUNCH_MODES, SCALES


@dataclasses.dataclass(frozen=True)
class PartitionFacts:
    '''What the site configuration says about one partition.'''
    name: str
    #: Most nodes one job may use (``extras['max_nodes']``).
    max_nodes: int
    #: GPUs per node (``devices`` of type ``gpu``); 0 on CPU partitions.
    gpus_per_node: int
    #: Logical CPUs per node (``processor.num_cpus``), None when unknown.
    cpus_per_node: int = None
    #: Name of the job launcher (``srun``, ``local``, ...).
    launcher: str = 'srun'
    #: Scales the site runs here (``extras['scales']``); None: all that fit.
    scales: tuple = None


@dataclasses.dataclass(frozen=True)
class Layout:
    '''Nodes, ranks and resources of one test case.'''
    num_nodes: int
    procs_per_node: int
    gpus_per_node: int
    cpus_per_proc: int = None

    @property
    def world_size(self):
        return self.num_nodes * self.procs_per_node

    def tasks_per_node(self, launch_mode):
        '''The launcher's tasks a node: one per rank (``per_task``), or one
        torchrun that starts the node's ranks (``torchrun``).'''
        return 1 if launch_mode == 'torchrun' else self.procs_per_node


class LayoutError(ValueError):
    '''A layout that the partition cannot run; the message names the fix.'''


def resolve_layout(scale_name, part, num_nodes=None, procs_per_node=None):
    '''The layout of *scale_name* on *part*; explicit counts override the scale.'''
    try:
        scale = SCALES[scale_name]
    except KeyError:
        raise LayoutError(f'unknown scale {scale_name!r}; known scales: '
                          f'{", ".join(SCALES)}') from None

    nodes = scale.num_nodes if num_nodes is None else num_nodes
    if procs_per_node is not None:
        ppn = procs_per_node
    elif scale.procs_per_node is not None:
        ppn = scale.procs_per_node
    else:
        ppn = part.gpus_per_node or 1

    if nodes < 1:
        raise LayoutError(f'num_nodes must be a positive integer, got {nodes}: '
                          f'fix -S num_nodes')
    if ppn < 1:
        raise LayoutError(f'procs_per_node must be a positive integer, got '
                          f'{ppn}: fix -S procs_per_node')

    cpus_per_proc = None
    if part.cpus_per_node:
        cpus_per_proc = max(1, part.cpus_per_node // ppn)

    return Layout(nodes, ppn, min(part.gpus_per_node, ppn) if part.gpus_per_node
                  else 0, cpus_per_proc)


def misfit(layout, part, launch_mode):
    '''Why *part* cannot run *layout* in *launch_mode*, or None if it can.'''
    if launch_mode not in LAUNCH_MODES:
        return (f'unknown launch mode {launch_mode!r}; known modes: '
                f'{", ".join(LAUNCH_MODES)}')
    if layout.num_nodes > part.max_nodes:
        return (f'{layout.num_nodes} nodes requested but partition {part.name} '
                f'allows {part.max_nodes} (extras max_nodes in the site config): '
                f'choose a smaller scale or -S num_nodes')
    if part.gpus_per_node and layout.procs_per_node > part.gpus_per_node:
        return (f'{layout.procs_per_node} ranks per node but partition '
                f'{part.name} has {part.gpus_per_node} GPUs per node: lower '
                f'-S procs_per_node or choose a smaller scale')
    if (not part.gpus_per_node and part.cpus_per_node and
            layout.procs_per_node > part.cpus_per_node):
        return (f'{layout.procs_per_node} ranks per node but partition '
                f'{part.name} has {part.cpus_per_node} CPUs per node')
    if (launch_mode == 'per_task' and part.launcher == 'local' and
            layout.world_size > 1):
        return (f'the local launcher of {part.name} starts one task, not '
                f'{layout.world_size}: use launch_mode torchrun')

    return None


def runs_scale(scale_name, part, launch_mode):
    '''True if *part* runs the parameterised *scale_name* in *launch_mode*.'''
    if part.scales is not None and scale_name not in part.scales:
        return False

    try:
        layout = resolve_layout(scale_name, part)
    except LayoutError:
        return False

    if misfit(layout, part, launch_mode) is not None:
        return False
    return duplicated_by(scale_name, part, launch_mode) is None


def duplicated_by(scale_name, part, launch_mode):
    '''The per-process scale that runs the same layout as whole-node scale
    *scale_name* on *part* (and runs there), or None.

    A whole node is one rank on a CPU partition and on a 1-GPU one, two on
    a 2-GPU one: ``1_node`` is then ``1_proc`` or ``2_procs`` again, and
    every case would run twice. The per-process scale is kept.
    '''
    if SCALES[scale_name].procs_per_node is not None:
        return None
    layout = resolve_layout(scale_name, part)
    for name, scale in SCALES.items():
        if (scale.procs_per_node is not None and
                (scale.num_nodes, scale.procs_per_node) ==
                (layout.num_nodes, layout.procs_per_node) and
                runs_scale(name, part, launch_mode)):
            return name
    return None
