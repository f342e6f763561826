"""Placement: which partitions a scale runs on, and the job's nodes,
tasks, CPUs and GPUs (the decisions: :mod:`hpctestlib_ml.layout`)."""
import math

import reframe.core.runtime as rt
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.logging import getlogger
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml.constants import (CONTAINER_FEATURE, LAUNCH_MODES,
                                     SCALES)
from hpctestlib_ml.container_launch import PLATFORMS
from hpctestlib_ml.errors import BadInputError, positive_int
from hpctestlib_ml.launch import takes_whole_nodes
from hpctestlib_ml.settings import duration_text
from hpctestlib_ml.layout import (LayoutError, PartitionFacts, misfit,
                                  resolve_layout, runs_scale)

#: ReFrame's built-in configuration's system (no config file was found).
BUILTIN_SYSTEM = 'generic'

#: Set once the "no configuration" warning has been printed.
_warned = {'no_config': False}


def warn_if_no_partition_fits():
    '''On ReFrame's built-in ``generic`` system no check of the suite runs
    (its one environment has none of their features): say once what to
    pass, instead of ReFrame's bare "Found 0 check(s)".'''
    if rt.runtime().system.name != BUILTIN_SYSTEM or _warned['no_config']:
        return
    _warned['no_config'] = True
    getlogger().warning(
        "hpcml: ReFrame found no configuration and runs its built-in "
        "'generic' system, where these checks do not run: pass "
        "-C config/local.py (this machine) or a site config "
        "(config/slurm.py, config/systems/), or run inside the project's "
        ".venv, where config/local.py is the default")


def partition_facts(part):
    '''The :class:`~hpctestlib_ml.layout.PartitionFacts` of a ReFrame
    partition.'''
    scheduler = part.scheduler.registered_name
    max_nodes = part.extras.get('max_nodes', 1 if scheduler == 'local' else
                                math.inf)
    scales = part.extras.get('scales')
    return PartitionFacts(
        name=part.fullname,
        max_nodes=max_nodes,
        gpus_per_node=sum(d.num_devices for d in part.devices
                          if d.device_type == 'gpu'),
        cpus_per_node=part.processor.num_cpus,
        launcher=part.launcher_type.registered_name,
        scales=tuple(scales) if scales is not None else None,
    )


class Placement(RegressionTestPlugin):
    '''The scale and launch mode of a case, the partitions they fit, and
    the job's layout (``layout``, a :class:`~hpctestlib_ml.layout.Layout`,
    from setup on).'''

    #: Named scale (:data:`~hpctestlib_ml.constants.SCALES`): nodes and
    #: ranks per node. Partitions run those in their ``extras['scales']``,
    #: or all that fit.
    scale = parameter(list(SCALES))

    #: ``per_task`` (the launcher starts every rank) or ``torchrun`` (one
    #: torchrun per node starts the node's ranks).
    launch_mode = parameter(list(LAUNCH_MODES))

    #: Nodes; overrides the scale's (a bad value fails with the reason).
    #: Count variables also take text, so that ``-S num_nodes=abc`` fails
    #: the test with a reason instead of stopping ReFrame with a traceback.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the scale's)
    num_nodes = variable(str, int, type(None), value=None)

    #: Ranks per node; overrides the scale's (default: one per GPU, or the
    #: scale's count on CPU partitions).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the scale's)
    procs_per_node = variable(str, int, type(None), value=None)

    #: GPUs per node the job asks for (set at setup; 0 on CPU partitions).
    #:
    #: :type: :class:`int`
    #: :default: ``0``
    gpus_per_node = variable(int, value=0)

    #: OpenMP threads per rank (``OMP_NUM_THREADS``); None: the node's CPUs
    #: shared between its ranks. Not part of ``reference_case``: fewer
    #: threads is the same case on a slower machine, as a regression would
    #: be.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    threads_per_rank = variable(str, int, type(None), value=None)

    @run_after('init')
    def keep_partitions_that_fit(self):
        '''Run each parameterised scale only where the site says it fits.

        ``-S num_nodes``/``-S procs_per_node`` change the layout of the
        cases selected this way; a layout that does not fit fails at setup
        with the reason.
        '''
        if self.runs_in_container:
            # The image brings the framework: no host Python environment.
            self.valid_prog_environs = [f'+{CONTAINER_FEATURE}']
        candidates = rt.valid_sysenv_comb(self.valid_systems,
                                          self.valid_prog_environs,
                                          check_environs=False)
        warn_if_no_partition_fits()
        self.valid_systems = [
            part.fullname for part in candidates
            if runs_scale(self.scale, partition_facts(part), self.launch_mode)
            and self.enough_ranks(part)
            and (not self.runs_in_container or
                 part.container_runtime in PLATFORMS)
            and self.runs_on(part)
        ]

    def enough_ranks(self, part):
        '''Whether the scale gives the workload its declaration's
        ``min_world_size`` of ranks on *part*.'''
        try:
            layout = resolve_layout(self.scale, partition_facts(part))
        except LayoutError:
            return False
        return layout.world_size >= self.declaration().min_world_size

    @property
    def rank_threads(self):
        '''The CPU threads each rank is given (``OMP_NUM_THREADS``, from
        setup on): :attr:`threads_per_rank`, else the node's CPUs shared
        by its ranks; None where neither is known.'''
        return self.threads_per_rank or self.layout.cpus_per_proc

    @property
    def uses_gpus(self):
        '''Whether the case's ranks compute on GPUs (from setup on).'''
        return self.layout.gpus_per_node > 0

    def partition_gpu_model(self):
        '''The GPU model key of the partition's config; None where the
        config names none, or the case uses no GPU.'''
        gpus = (self.current_partition.select_devices('gpu')
                if self.uses_gpus else [])
        return gpus[0].model if gpus else None

    def resolve_layout(self):
        '''``layout`` of the scale on this partition, with the user's
        ``num_nodes``/``procs_per_node``; a
        :class:`~hpctestlib_ml.errors.BadInputError` naming the fix where it
        does not fit.'''
        facts = partition_facts(self.current_partition)
        nodes, ppn = (None if value is None else positive_int(name, value)
                      for name, value in (('num_nodes', self.num_nodes),
                                          ('procs_per_node',
                                           self.procs_per_node)))
        try:
            self.layout = resolve_layout(self.scale, facts, nodes, ppn)
        except LayoutError as err:
            raise BadInputError(str(err)) from None
        reason = misfit(self.layout, facts, self.launch_mode)
        if reason:
            raise BadInputError(reason)
        fewest = self.declaration().min_world_size
        if self.layout.world_size < fewest:
            raise BadInputError(
                f'{self.workload} needs {fewest} ranks or '
                f'more, the layout has {self.layout.world_size}: raise -S '
                f'num_nodes or -S procs_per_node')
        self.num_nodes = self.layout.num_nodes
        self.procs_per_node = self.layout.procs_per_node
        self.gpus_per_node = self.layout.gpus_per_node

    def set_job_layout(self):
        '''The job's tasks, CPUs per task and GPUs per node: one task per
        rank (``per_task``) or per node (``torchrun``); its time limit at
        most the partition's (:meth:`cap_time_limit`); whole nodes
        (``--exclusive``) where the partition's ``extras['exclusive']``
        says, by default on a batch scheduler's GPU partition
        (:func:`hpctestlib_ml.launch.takes_whole_nodes`).'''
        part = self.current_partition
        self.cap_time_limit()
        self.exclusive_access = takes_whole_nodes(
            part.extras.get('exclusive'),
            partition_facts(part).gpus_per_node,
            part.scheduler.registered_name)
        layout = self.layout
        torchrun = self.launch_mode == 'torchrun'
        tasks_per_node = layout.tasks_per_node(self.launch_mode)
        self.num_tasks = layout.num_nodes * tasks_per_node
        self.num_tasks_per_node = tasks_per_node
        if layout.cpus_per_proc:
            self.num_cpus_per_task = layout.cpus_per_proc * (
                layout.procs_per_node if torchrun else 1)
        if self.uses_gpus:
            self.extra_resources = {
                'gpu': {'num_gpus_per_node': layout.gpus_per_node}
            }

    def cap_time_limit(self):
        '''The case's time limit at most the partition's
        ``extras['max_time_limit']`` (its MaxTime: sbatch refuses a job
        that asks more, and ReFrame's ``time_limit`` of a partition is only
        the default of a case that sets none, which none of the suite's
        does), the size's own limit said beside it: a comment at the top of
        the job script and a line of the log (after the size, which sets
        the limit, has been resolved).'''
        cap = self.current_partition.extras.get('max_time_limit')
        asked = self.time_limit
        if not cap or asked is None or asked <= cap:
            return
        self.time_limit = cap
        note = (f"hpcml: time limit {duration_text(cap)}, the partition's "
                f"max_time_limit; the case asks {duration_text(asked)}")
        self.prerun_cmds = [f'# {note}', *self.prerun_cmds]
        getlogger().info(f'{self.display_name}: {note}')
