"""Launching: the command that starts the program on every rank, and the
environment the programs read (the commands: :mod:`hpctestlib_ml.launch`).
"""
from reframe.core.builtins import variable
from reframe.core.pipeline import RegressionTestPlugin
import reframe.utility.typecheck as typ

from hpctestlib_ml import launch
from hpctestlib_ml.constants import CPU_ALLOCATOR_ENV
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.paths import SRC_DIR


class Launching(RegressionTestPlugin):
    '''``srun``/``mpirun``/local per rank, or one ``torchrun`` per node,
    of ``python -m <program>`` with ``PYTHONPATH=src``.'''

    #: Python interpreter that runs the program on the compute nodes.
    #:
    #: :type: :class:`str`
    #: :default: ``'python3'``
    python = variable(str, value='python3')

    #: Directories put before ``src/`` on the program's PYTHONPATH (a
    #: program installed outside the suite, e.g. tf_cnn_benchmarks):
    #: ``-S python_path=DIR[,DIR...]``.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]``
    python_path = variable(typ.List[str], value=[])

    def set_launch_command(self):
        '''The rendezvous and thread variables, the launcher's options
        (with the partition's ``extras['rank_binding']`` where a task is one
        rank), the job's environment passed to its tasks where the
        partition's ``access`` exports none to the job (``--export=NONE``),
        and the program's command line in the chosen launch mode.'''
        part = self.current_partition
        scheduler = part.scheduler.registered_name
        address = part.extras.get('rendezvous_address', '{hostname}')
        try:
            self.prerun_cmds += launch.rendezvous_env(scheduler, address)
        except ValueError as err:
            raise BadInputError(f'{part.fullname}: {err}') from None
        self.prerun_cmds += launch.thread_env(self.rank_threads)
        self.prerun_cmds += launch.export_lines(part.access, scheduler)
        self.job.launcher.options += launch.launcher_options(
            part.launcher_type.registered_name)
        self.job.launcher.options += launch.binding_options(
            part.extras.get('rank_binding'), self.launch_mode)
        path = ':'.join([*map(str, self.python_path), str(SRC_DIR)])
        self.env_vars['PYTHONPATH'] = f'{path}${{PYTHONPATH:+:$PYTHONPATH}}'
        args = launch.quote_args(self.program_args())
        if self.launch_mode == 'torchrun':
            self.executable, self.executable_opts = launch.torchrun_command(
                self.python, self.program, args, self.layout.num_nodes,
                self.layout.procs_per_node, launch.job_id_expr(scheduler))
        else:
            self.executable, self.executable_opts = launch.per_task_command(
                self.python, self.program, args)

    def loader_workers(self, asked=None):
        '''Data-loader worker processes per rank: *asked* (a workload's
        ``-S workers``), else the partition's ``extras['loader_workers']``,
        else the rank's CPUs on GPUs (jubench-mmoclip passes
        ``--workers=$threadspertask``, its ``--cpus-per-task``: 24 on JUWELS
        Booster's 96 CPUs and 4 GPUs a node) and 0 on CPUs (the ranks are
        the compute there). Never more than the rank's CPUs
        (``processor.num_cpus`` over the node's ranks): a site's value is
        capped to them, a ``-S workers`` above them refused.'''
        cpus = self.layout.cpus_per_proc or 1
        if asked is not None:
            if asked > cpus:
                raise BadInputError(
                    f'-S workers={asked}: more data-loader workers than the '
                    f'CPUs a rank has ({cpus}: processor.num_cpus over the '
                    f'node\'s {self.layout.procs_per_node} ranks): at most '
                    f'{cpus}')
            return asked
        if not self.uses_gpus:
            return 0
        site = self.current_partition.extras.get('loader_workers')
        return cpus if site is None else min(site, cpus)

    def set_device_env(self):
        '''What the programs need to know of their devices: the kind the
        partition has (``HPCML_DEVICE_KIND``: a GPU case whose torch sees
        no GPU stops at once; a CPU case computes on the CPU even on a
        machine with GPUs, which it does not see), the node's GPUs of the
        case (``HPCML_GPUS_PER_NODE``: the energy sampler counts those),
        the ranks on a node (``LOCAL_WORLD_SIZE``, which torchrun sets
        itself) and, on GPUs, NCCL's own account of its version and
        transport (``NCCL_DEBUG=INFO`` for its INIT and NET subsystems,
        unless the site sets NCCL_DEBUG); on CPUs, malloc settings that
        keep freed memory
        (:data:`~hpctestlib_ml.constants.CPU_ALLOCATOR_ENV`).'''
        self.env_vars['HPCML_DEVICE_KIND'] = 'gpu' if self.uses_gpus else 'cpu'
        self.env_vars['HPCML_GPUS_PER_NODE'] = str(self.layout.gpus_per_node)
        if self.launch_mode == 'per_task':
            self.env_vars['LOCAL_WORLD_SIZE'] = str(self.layout.procs_per_node)
        if self.uses_gpus:
            self.env_vars['NCCL_DEBUG'] = '${NCCL_DEBUG:-INFO}'
            self.env_vars['NCCL_DEBUG_SUBSYS'] = \
                '${NCCL_DEBUG_SUBSYS:-INIT,NET}'
            return
        for name in ('CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES'):
            self.env_vars[name] = ''
        for name, value in CPU_ALLOCATOR_ENV.items():
            self.env_vars[name] = f'${{{name}:-{value}}}'
