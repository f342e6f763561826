"""MLTrainingTest: the one place that turns a partition and a scale into a job.

Every workload derives from :class:`MLTrainingTest` and says only what is its
own: the program and its arguments, its sizes, how to read its log, its
FLOPs per sample. The base owns everything else:

- which partitions a scale and launch mode run on (site facts from config);
- nodes, tasks, CPUs and GPUs of the job, and the launch command;
- the size (``tiny`` on CPU partitions, ``benchmark`` on GPU ones, or ``-S size=``);
- checks that fail with a one-line reason naming the fix;
- the sanity function and MFU, and the external references file.
"""
import math
import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (parameter, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import (PerformanceError, ReframeError,
                                     SanityError)
from reframe.core.logging import getlogger

from hpctestlib_ml import (SRC_DIR, container, device_check, energy, launch,
                           memory_estimate, peaks, provenance, references)
from hpctestlib_ml.parsers import failures, hpcml_records
from hpctestlib_ml.flops import RECOMPUTE_FACTOR, TRAINING_FACTOR
from hpctestlib_ml.constants import (CONTAINER_FEATURE, CONTAINER_PLATFORM,
                                     CPU_ALLOCATOR_ENV, DEVICE_MEMORY_GIB,
                                     FRAMEWORKS,
                                     GPU_FEATURE, LAUNCH_MODES, SCALES, SIZES)
from hpctestlib_ml.layout import (LayoutError, PartitionFacts, misfit,
                                  resolve_layout, runs_scale)


#: Training steps of a ``tiny`` run where its size names none.
DEFAULT_STEPS = 8

#: What ``short`` changes of a workload's ``benchmark`` size: the
#: benchmark's model, per-device batch, precision and options for this many
#: steps (``-S steps=`` changes them), with a time limit to match. A
#: workload's ``sizes['short']`` changes this in turn (a None value removes
#: a benchmark setting, e.g. MMoCLIP's 3.2M samples).
SHORT_SIZE = {'steps': 100, 'time_limit': '1h'}


class BadInputError(ReframeError):
    '''A test variable or site setting that cannot work; the message names the fix.'''


def count(name, value, minimum=1):
    '''*value* (an int, or text from ``-S``) as an int >= *minimum*.'''
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < minimum or str(number) != str(value).strip():
        raise BadInputError(f'{name} must be an integer >= {minimum}, got '
                            f'{value!r}: fix -S {name}')
    return number


#: ReFrame's built-in configuration's system (no config file was found).
BUILTIN_SYSTEM = 'generic'


def warn_if_no_partition_fits():
    '''On ReFrame's built-in ``generic`` system no check of the suite runs
    (its one environment has none of their features): say once what to
    pass, instead of ReFrame's bare "Found 0 check(s)".'''
    if rt.runtime().system.name != BUILTIN_SYSTEM or _warned_no_config:
        return
    _warned_no_config.append(True)
    getlogger().warning(
        "hpcml: ReFrame found no configuration and runs its built-in "
        "'generic' system, where these checks do not run: pass "
        "-C config/local.py (this machine) or a site config "
        "(config/slurm.py, config/systems/), or run inside the project's "
        ".venv, where config/local.py is the default")


_warned_no_config = []


def partition_facts(part):
    '''The :class:`PartitionFacts` of a ReFrame partition.'''
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


class MLTrainingTest(rfm.RunOnlyRegressionTest, special=True):
    '''Base of the suite's training tests (see the module docstring).

    Derived classes set :attr:`workload`, :attr:`program`, :attr:`sizes`
    and implement :meth:`program_args`, :meth:`log_problems`,
    :meth:`extract_metrics` and :meth:`model_flops_per_sample`.
    '''

    #: Named scale (:data:`~hpctestlib_ml.constants.SCALES`): nodes and ranks
    #: per node. Partitions run those in their ``extras['scales']``, or all
    #: that fit.
    scale = parameter(list(SCALES))

    #: ``per_task`` (the launcher starts every rank) or ``torchrun`` (one
    #: torchrun per node starts the node's ranks).
    launch_mode = parameter(list(LAUNCH_MODES))

    #: ``tiny``, ``short``, ``benchmark`` or ``auto`` (``benchmark`` on
    #: partitions with the ``gpu`` feature, else ``tiny``). ``short``: the
    #: benchmark's model, per-device batch and options for a fixed number of
    #: steps (:data:`SHORT_SIZE`), the nightly regression run; on partitions
    #: without GPUs only when ``-S steps=`` asks for it.
    #:
    #: :type: :class:`str`
    size = variable(str, value='auto')

    #: Nodes; overrides the scale's (a bad value fails with the reason).
    #: Count variables also take text, so that ``-S num_nodes=abc`` fails
    #: the test with a reason instead of stopping ReFrame with a traceback.
    #:
    #: :type: :class:`int` or :obj:`None`
    num_nodes = variable(str, int, type(None), value=None)

    #: Ranks per node; overrides the scale's (default: one per GPU, or the
    #: scale's count on CPU partitions).
    #:
    #: :type: :class:`int` or :obj:`None`
    procs_per_node = variable(str, int, type(None), value=None)

    #: GPUs per node the job asks for (set at setup; 0 on CPU partitions).
    #:
    #: :type: :class:`int`
    gpus_per_node = variable(int, value=0)

    #: Local (per-rank) batch size; default: the size's.
    #:
    #: :type: :class:`int` or :obj:`None`
    batch_size = variable(str, int, type(None), value=None)

    #: Training precision as the program names it; default: the size's on
    #: GPUs, ``fp32`` on CPUs.
    #:
    #: :type: :class:`str` or :obj:`None`
    precision = variable(str, type(None), value=None)

    #: Training steps; default: the size's, else 8. At ``benchmark`` size a
    #: workload whose benchmark fixes the work (MMoCLIP's samples, GPT-2's
    #: epochs) refuses another value (:meth:`fixed_work`).
    #:
    #: :type: :class:`int`
    steps = variable(str, int, type(None), value=None)

    #: OpenMP threads per rank (``OMP_NUM_THREADS``); None: the node's CPUs
    #: shared between its ranks. Not part of :attr:`reference_case`: fewer
    #: threads is the same case on a slower machine, as a regression would
    #: be (``-S threads_per_rank=1`` is how the tests make a real slowdown).
    #:
    #: :type: :class:`int` or :obj:`None`
    threads_per_rank = variable(int, type(None), value=None)

    #: Directories put before ``src/`` on the program's PYTHONPATH (a
    #: program installed outside the suite, e.g. tf_cnn_benchmarks).
    #:
    #: ``-S python_path=DIR[,DIR...]`` on the command line.
    #:
    #: :type: :class:`List[str]`
    python_path = variable(typ.List[str], value=[])

    #: Python interpreter that runs the program on the compute nodes.
    #:
    #: :type: :class:`str`
    python = variable(str, value='python3')

    #: Workload name: the references file and ``hpcml extract`` use it.
    #:
    #: :type: :class:`str`
    workload = variable(str)

    #: Python module under ``src/`` that is the training program.
    #:
    #: :type: :class:`str`
    program = variable(str)

    #: Size name -> defaults for variables the user left unset, and
    #: ``time_limit``.
    #:
    #: :type: :class:`dict`
    sizes = variable(dict, value={})

    #: Framework of the program: its container image is built from
    #: ``containers/<framework>.def``.
    #:
    #: :type: :class:`str`
    framework = variable(str, value='pytorch')

    #: Run the program in the framework's Apptainer image (the
    #: ``*Container`` checks): only on partitions whose config lists the
    #: Apptainer container platform.
    #:
    #: :type: :class:`bool`
    runs_in_container = variable(bool, value=False)

    #: Image to run in; default: the partition's
    #: ``extras['container_images'][framework]``, else
    #: ``containers/<framework>.sif`` in the repository.
    #:
    #: :type: :class:`str` or :obj:`None`
    container_image = variable(str, type(None), value=None)

    #: Provenance logged with every result (``hpctestlib_ml.provenance``):
    #: the suite's version and commit, and what the job found on the node.
    suite_version = variable(str, value='')
    framework_versions = variable(str, value='')
    gpu_driver = variable(str, value='')
    cuda_version = variable(str, value='')
    nccl_version = variable(str, value='')
    env_switches = variable(str, value='')

    #: The energy counters of the figures (``rapl(2 packages)``, ...), or
    #: ``none: <reason>``.
    energy_counter = variable(str, value='')

    #: Skip, at setup, a case whose estimated memory per device
    #: (:meth:`memory_estimate`) exceeds what the partition's devices have
    #: (:meth:`device_memory_gib`); ``-S memory_check=false`` queues it
    #: anyway (to see the out-of-memory error, or where the estimate is
    #: wrong).
    #:
    #: :type: :class:`bool`
    memory_check = variable(typ.Bool, value=True)

    #: The resolved size, layout and device, set at setup.
    resolved_size = variable(str, type(None), value=None)
    device = variable(str, value='cpu')

    #: What the ranks say they ran on (their ``[hpcml] device`` records):
    #: kind, backend, product name and ranks, e.g. ``gpu cuda NVIDIA H100
    #: 80GB HBM3 x4``; '' where the program prints no record. Logged with
    #: every result.
    #:
    #: :type: :class:`str`
    device_ran = variable(str, value='')

    #: The peak MFU divides by, as used: device model, the precision's
    #: rate (fp32 at ``tf32`` only where the ranks say TF32 was on) and
    #: its FLOP/s, e.g. ``H100-SXM bf16 989.4 TFLOP/s per GPU``; '' without
    #: MFU. Logged with every result.
    #:
    #: :type: :class:`str`
    mfu_peak = variable(str, value='')

    #: How this run departs from the upstream benchmark's own
    #: configuration beyond the suite's measurement window (e.g. mock data
    #: where it trains on a dataset, a kernel the node lacks); 'none'
    #: where the workload checks and nothing does, '' where it does not
    #: check. Logged with every result.
    #:
    #: :type: :class:`str`
    departures = variable(str, value='')

    #: The precision the upstream reference program trains in, beside
    #: :attr:`precision` (what this run trained in), e.g. ``fp32`` where
    #: the benchmark size trains mixed as the MLPerf submissions do
    #: (:mod:`hpctestlib_ml.precisions`); '' where the workload records
    #: none. Logged with every result.
    #:
    #: :type: :class:`str`
    reference_precision = variable(str, value='')

    #: The memory per device the suite estimated at setup (as ``hpcml
    #: model-info --memory``), e.g. ``27.0 GiB``; '' where the workload
    #: has no estimate. Logged with every result, beside what a GPU run
    #: measures (``gpu_mem_peak_MiB``).
    #:
    #: :type: :class:`str`
    memory_estimated = variable(str, value='')

    #: What this case is on its partition, for references from history
    #: (``$index: [$partition, reference_case]``): size, nodes x ranks per
    #: node, launch mode, batch, precision, the test's own parameters and
    #: :meth:`reference_case_options`; set at setup, logged with every
    #: result. E.g. ``tiny 1x1 per_task batch=4 fp32``.
    #:
    #: :type: :class:`str`
    reference_case = variable(str, value='')

    #: The first logged training losses (fixed seeds), logged with every
    #: result: ``hpcml references`` makes a reference curve of them, and a
    #: run whose curve leaves it fails (a numerics regression).
    #:
    #: :type: :class:`str`
    loss_curve = variable(str, value='')

    #: The references file of this test (``<workload>.yaml`` in
    #: :data:`~hpctestlib_ml.REFERENCES_DIR`).
    #:
    #: :type: :class:`str`
    references_file = variable(str, value='')

    valid_systems = ['*']
    valid_prog_environs = ['+torch']

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
            and (not self.runs_in_container or
                 CONTAINER_PLATFORM in part.container_environs)
            and self.runs_on(part)
        ]

    @run_after('init')
    def record_suite_version(self):
        self.suite_version = provenance.suite_version()

    @run_after('init')
    def use_reference_file(self):
        self.references_file = references.references_file(self.workload)
        if os.path.isfile(self.references_file):
            self.reference = {'$ref': self.references_file}

    @property
    def uses_gpus(self):
        return self.layout.gpus_per_node > 0

    @run_after('setup')
    def configure_job(self):
        '''Size, layout, job resources, launch command and MFU, in order.'''
        self.resolve_size_and_layout()
        self.skip_if_it_cannot_fit()
        self.reference_case = self.reference_case_key()
        self.set_job_layout()
        self.set_launch_command()
        self.set_device_env()
        if self.runs_in_container:
            self.use_container()
        self.add_utilisation_metrics()
        self.add_record_metrics()

    def resolve_size_and_layout(self):
        part = self.current_partition
        facts = partition_facts(part)
        nodes, ppn = (None if value is None else count(name, value)
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

        self.num_nodes = self.layout.num_nodes
        self.procs_per_node = self.layout.procs_per_node
        self.gpus_per_node = self.layout.gpus_per_node

        size = self.size
        if size == 'auto':
            size = self.default_size(part)
        sizes = self.size_table()
        if size not in SIZES or size not in sizes:
            known = ', '.join(s for s in SIZES if s == 'auto' or s in sizes)
            raise BadInputError(f'unknown size {self.size!r} for {self.workload}'
                                f': use -S size= one of {known}')
        self.resolved_size = size
        self.device = 'cuda' if self.uses_gpus else 'cpu'
        asked_steps, asked_precision = self.steps, self.precision
        if asked_steps is not None and size == 'benchmark':
            fixed = self.fixed_work()
            if fixed:
                raise BadInputError(
                    f'-S steps={asked_steps} at size benchmark: {fixed}, so '
                    f'other steps would not be the benchmark; for '
                    f'{asked_steps} steps of its model use --mode short '
                    f'(-S size=short)')

        for name, value in sizes[size].items():
            if name == 'time_limit':
                if self.time_limit is None:
                    self.time_limit = value
            elif getattr(self, name) is None:
                setattr(self, name, value)

        if size == 'short' and not self.uses_gpus and asked_steps is None:
            self.skip(f'size short runs the benchmark model of '
                      f'{self.workload} at its per-GPU batch '
                      f'({self.batch_size}) for {self.steps} steps: it is '
                      f'meant for GPU partitions; to run it on '
                      f'{part.fullname} anyway, ask for the steps '
                      f'(-S steps=N) and a batch that fits (-S batch_size=N)')
        if self.precision is None or (not self.uses_gpus and
                                      asked_precision is None):
            # The sizes' mixed precisions are for GPUs; CPUs train fp32
            # unless -S precision= says otherwise.
            self.precision = 'fp32'
        self.batch_size = count('batch_size', self.batch_size)
        # The first logged step is warm-up: steady state needs two.
        self.steps = count('steps', DEFAULT_STEPS if self.steps is None
                           else self.steps, minimum=2)

        sized_precision = None if asked_precision else self.precision
        self.finalize_settings()
        self.use_precision_the_device_has(sized_precision)

    def device_memory_gib(self):
        '''(GiB of memory one rank's device has, where the figure comes
        from), or (None, why not).

        ``extras['device_memory_gib']`` of the partition (ReFrame's
        ``devices`` have no memory field), else on GPU partitions the
        model's size where it has one (:data:`~hpctestlib_ml.constants.
        DEVICE_MEMORY_GIB`). On CPU partitions the CPU is the device: the
        extras' figure is the node's memory, shared by its ranks
        (``config/local.py`` sets it from MemTotal).'''
        part = self.current_partition
        extras = part.extras.get('device_memory_gib')
        if not self.uses_gpus:
            if not extras:
                return None, (f"{part.fullname} says no "
                              f"extras['device_memory_gib'] (its nodes' "
                              f"memory)")
            ranks = self.layout.procs_per_node
            return float(extras) / ranks, (
                f"the node's {float(extras):.1f} GiB (extras"
                f"['device_memory_gib']) shared by {ranks} rank(s)")
        if extras:
            return float(extras), "extras['device_memory_gib']"
        model = self.partition_gpu_model()
        if model in DEVICE_MEMORY_GIB:
            return float(DEVICE_MEMORY_GIB[model]), f'{model} data sheet'
        return None, (f"{part.fullname}'s GPU model {model!r} has no known "
                      f"memory size: set extras['device_memory_gib']")

    def memory_estimate(self):
        '''The case's :class:`~hpctestlib_ml.memory_estimate.
        MemoryEstimate` per device (called at setup, after
        :meth:`finalize_settings`), or None where the workload has none.'''
        return None

    def memory_fit_hints(self, estimate, device_gib):
        '''How to make *estimate* fit a device of *device_gib* GiB: the
        largest per-device batch that would fit, where one would.'''
        if estimate.static > memory_estimate.tensor_room(estimate,
                                                         device_gib):
            return [f'weights, gradients and optimizer state alone need '
                    f'{estimate.static / memory_estimate.GIB:.1f} GiB: '
                    f'devices with more memory, or more of them sharing '
                    f'the model']
        batch = memory_estimate.largest_batch(estimate, self.batch_size,
                                              device_gib)
        if batch:
            return [f'-S batch_size={batch} would fit']
        if batch == 0:
            return ['not even a batch of one fits']
        return []

    def skip_if_it_cannot_fit(self):
        '''Skip, at setup, a case that needs more memory per device than
        the partition's devices have (:meth:`memory_estimate`,
        :meth:`device_memory_gib`; a reserve of
        :data:`~hpctestlib_ml.memory_estimate.RESERVE_FRACTION`, at least
        :data:`~hpctestlib_ml.memory_estimate.RESERVE_MIN_GIB`, kept free
        for the CUDA context and the allocator), with the numbers and
        what would fit. A case whose memory is unknown is not skipped (the
        log says so). The estimate is logged either way
        (:attr:`memory_estimated`).'''
        estimate = self.memory_estimate()
        if estimate is None:
            return
        self.memory_estimated = (f'{estimate.total / memory_estimate.GIB:.1f}'
                                 f' GiB')
        if not self.memory_check:
            return
        device_gib, source = self.device_memory_gib()
        if device_gib is None:
            getlogger().info(f'{self.display_name}: no memory check: '
                             f'{source}; {estimate.describe()}')
            return
        if memory_estimate.fits(estimate, device_gib):
            return
        usable = memory_estimate.usable_gib(device_gib)
        hints = self.memory_fit_hints(estimate, device_gib)
        reserve = ('the CUDA context and allocator' if self.uses_gpus
                   else 'the system')
        self.skip(
            f'needs {estimate.describe()}; the partition\'s devices have '
            f'{device_gib:.1f} GiB ({source}), {usable:.1f} of them for '
            f'the run ({device_gib - usable:.1f} kept for {reserve}): '
            + '; '.join(hints + [
                "if the device memory is wrong, set extras"
                "['device_memory_gib']; to queue it anyway, -S "
                "memory_check=false"]))

    def use_precision_the_device_has(self, sized_precision):
        '''bf16 on GPUs without bf16 hardware (V100) is emulated, many
        times slower (``torch.cuda.is_bf16_supported()`` still says yes):
        a size's bf16 default (*sized_precision*) becomes its fp16 one,
        with loss scaling in every program; a bf16 case asked for (``-S
        precision=``, a workload's parameter) is skipped with the
        reason.'''
        fp16 = peaks.fp16_for(self.precision)
        model = self.partition_gpu_model()
        if fp16 is None or peaks.has_bf16(model):
            return
        if self.precision == sized_precision:
            getlogger().info(f'{self.display_name}: {model} has no bf16: '
                             f'running {fp16} instead of {self.precision}')
            self.precision = fp16
        else:
            self.skip(f'{model} has no bf16 hardware: precision '
                      f'{self.precision} would run emulated; use '
                      f'-S precision={fp16}')

    def set_job_layout(self):
        layout = self.layout
        torchrun = self.launch_mode == 'torchrun'
        tasks_per_node = 1 if torchrun else layout.procs_per_node
        self.num_tasks = layout.num_nodes * tasks_per_node
        self.num_tasks_per_node = tasks_per_node
        if layout.cpus_per_proc:
            self.num_cpus_per_task = layout.cpus_per_proc * (
                layout.procs_per_node if torchrun else 1)
        if self.uses_gpus:
            self.extra_resources = {
                'gpu': {'num_gpus_per_node': layout.gpus_per_node}
            }

    def set_launch_command(self):
        scheduler = self.current_partition.scheduler.registered_name
        address = self.current_partition.extras.get('rendezvous_address',
                                                    '{hostname}')
        try:
            self.prerun_cmds += launch.rendezvous_env(scheduler, address)
        except ValueError as err:
            raise BadInputError(f'{self.current_partition.fullname}: {err}') \
                from None

        self.prerun_cmds += launch.thread_env(self.threads_per_rank or
                                              self.layout.cpus_per_proc)
        self.job.launcher.options += launch.launcher_options(
            self.current_partition.launcher_type.registered_name)
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
        kind = 'gpu' if self.uses_gpus else 'cpu'
        self.env_vars['HPCML_DEVICE_KIND'] = kind
        self.env_vars['HPCML_GPUS_PER_NODE'] = str(self.layout.gpus_per_node)
        if self.launch_mode == 'per_task':
            self.env_vars['LOCAL_WORLD_SIZE'] = str(self.layout.procs_per_node)
        if self.uses_gpus:
            self.env_vars['NCCL_DEBUG'] = '${NCCL_DEBUG:-INFO}'
            self.env_vars['NCCL_DEBUG_SUBSYS'] = \
                '${NCCL_DEBUG_SUBSYS:-INIT,NET}'
        else:
            for name in ('CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES'):
                self.env_vars[name] = ''
            for name, value in CPU_ALLOCATOR_ENV.items():
                self.env_vars[name] = f'${{{name}:-{value}}}'

    def partition_gpu_model(self):
        '''The GPU model key of the partition's config; None where the
        config names none, or the case uses no GPU.'''
        gpus = (self.current_partition.select_devices('gpu')
                if self.uses_gpus else [])
        return gpus[0].model if gpus else None

    def use_container(self):
        '''Run the launch command in the framework's image (ReFrame's
        container platform): the repository bind-mounted at its path, the
        GPUs' runtime option from the partition's vendor.'''
        part = self.current_partition
        if self.framework not in FRAMEWORKS:
            raise BadInputError(f'no container image for framework '
                                f'{self.framework!r}: known are '
                                f'{", ".join(FRAMEWORKS)}')
        models = ([d.model for d in part.select_devices('gpu')]
                  if self.uses_gpus else [])
        try:
            vendor = container.gpu_vendor(models, part.extras)
            options = container.runtime_options(vendor)
            image = container.image_for(self.framework, vendor, part.extras,
                                        self.container_image)
        except container.ContainerError as err:
            raise BadInputError(f'{part.fullname}: {err}') from None

        self.container_image = image          # logged with the results
        self.prerun_cmds.append(container.image_check(image, self.framework))
        self.container_platform = CONTAINER_PLATFORM
        platform = self.container_platform
        platform.image = image
        platform.command = container.command_line(self.executable,
                                                  self.executable_opts)
        platform.mount_points = container.mount_points()
        platform.options = options

    def add_utilisation_metrics(self):
        '''``mfu`` (model FLOPs) and, with activation recomputation, ``hfu``
        (FLOPs executed: the forward once more), where the peak and the
        FLOPs per sample are known. The FLOPs are taken when the figures
        are computed, after the run: a workload may read its model's shape
        from the log (:meth:`model_flops_per_sample`); so is the peak, which
        follows the math mode the ranks report (:mod:`hpctestlib_ml.
        peaks`).'''
        try:
            self.peak_flops_per_node(records=[])       # before the run
        except LookupError as err:
            getlogger().warning(f'{self.display_name}: no MFU: {err}')
            return

        try:
            self.check_flops_known()
        except LookupError as err:
            getlogger().warning(f'{self.display_name}: no MFU: {err}')
            return

        nodes = self.layout.num_nodes
        self.perf_variables['mfu'] = sn.make_performance_function(
            lambda: self._utilisation(self.model_flops_per_sample(),
                                      self.peak_flops_per_node(), nodes), '%')
        if self.recomputes_activations():
            executed = self.recomputed_flops_factor()
            self.perf_variables['hfu'] = sn.make_performance_function(
                lambda: executed * self._utilisation(
                    self.model_flops_per_sample(),
                    self.peak_flops_per_node(), nodes), '%')

    def peak_flops_per_node(self, records=None):
        '''Peak FLOP/s of one node at the precision that ran; sets
        :attr:`mfu_peak`. LookupError where none is known. *records*: the
        ranks' ``device`` records (default: the log's).

        GPU partitions: the ``devices`` ``model`` looked up in
        :data:`~hpctestlib_ml.constants.DEVICE_PEAK_FLOPS` at the
        precision's rate (:func:`hpctestlib_ml.peaks.device_peak`; fp32 at
        the TF32 rate where the ranks' ``device`` records say TF32 ran, or
        say nothing), or ``extras['device_peak_flops']``; CPU partitions:
        ``extras['cpu_peak_flops']``.
        '''
        extras = self.current_partition.extras
        if not self.uses_gpus:
            peak = extras.get('cpu_peak_flops')
            if not peak:
                raise LookupError(f'no peak FLOP/s known for '
                                  f'{self.current_partition.fullname}: '
                                  f"set extras['cpu_peak_flops']")
            self.mfu_peak = (f'cpu {peak / 1e9:.1f} GFLOP/s per node '
                             f'(fp32, measured)')
            return peak

        peak = extras.get('device_peak_flops')
        if peak:
            self.mfu_peak = (f"extras['device_peak_flops'] "
                             f'{peak / 1e12:.1f} TFLOP/s per GPU')
        else:
            if records is None:
                records = self.device_records()
            tf32 = device_check.tf32(records)
            model = self.partition_gpu_model()
            peak, key = peaks.device_peak(model, self.precision, tf32)
            self.mfu_peak = peaks.describe(
                model, key, peak,
                assumed_tf32=key == 'tf32' and tf32 is None)
        return peak * self.layout.gpus_per_node

    def device_records(self):
        '''The ranks' ``[hpcml] device`` records in the log ([] where the
        program prints none).'''
        return self.log_records('device')

    def log_records(self, type_):
        '''The ranks' ``[hpcml]`` records of type *type_* in the log, read
        once per case (the log is read once too: :meth:`log_text`).'''
        if getattr(self, '_log_records', None) is None:
            self._log_records = {}
        if type_ not in self._log_records:
            self._log_records[type_] = hpcml_records.records(
                self.log_text(), type_)
        return self._log_records[type_]

    def prints_device_records(self):
        '''Whether the program prints the suite's ``[hpcml]`` records
        (every program of ``src/`` does; a workload running an upstream
        program of its own, such as Megatron-LM's ``pretrain_gpt.py``,
        says no).'''
        return True

    @run_before('performance')
    def add_device_metrics(self):
        '''What the ranks' records say: :attr:`device_ran` (and
        :attr:`mfu_peak`, from the math mode they report).'''
        records = self.device_records()
        self.device_ran = device_check.device_summary(records)
        if 'mfu' in self.perf_variables:
            self.peak_flops_per_node(records)        # sets mfu_peak

    def add_record_metrics(self):
        '''At setup, so that every run of a case logs the same columns
        (a perflog's header changes, and ReFrame starts a new file, when a
        case's figures do), where the program prints the suite's records:
        ``data_share`` (% of the steady-state step time spent waiting for
        data: the workload's parser's figure where its program logs its
        own, else the ``timing`` records) and, on GPUs, ``gpu_mem_peak_MiB``
        (the largest device memory a rank held; absent on CPUs, not
        zero).'''
        if not self.prints_device_records():
            return
        self.perf_variables['data_share'] = sn.make_performance_function(
            self._data_share, '%')
        if self.uses_gpus:
            self.perf_variables['gpu_mem_peak_MiB'] = \
                sn.make_performance_function(self._gpu_memory_peak, 'MiB')

    def _data_share(self):
        share = self.metrics().get('data_share')
        if share is None:
            share = device_check.data_share(self.log_records('timing'))
        if share is None:
            raise SanityError('data_share: no [hpcml] timing record in the '
                              'log')
        return share

    def _gpu_memory_peak(self):
        peak = device_check.gpu_memory_peak(self.log_records('memory'))
        if peak is None:
            raise SanityError('gpu_mem_peak_MiB: no [hpcml] memory record '
                              'in the log')
        return peak

    @run_before('performance')
    def add_provenance_and_energy(self):
        '''Read the job's provenance file; add ``max_rss_MiB`` (the
        largest training process the node samplers saw) and ``energy_J``,
        ``avg_power_W`` and ``energy_per_sample_J`` of the timed region
        where the nodes had energy counters, else say why not.'''
        facts = provenance.job_provenance(
            self.stagedir, log_text=self.log_text(), framework=self.framework,
            loaded_nccl=device_check.loaded_nccl(self.device_records()))
        for name, value in facts.items():
            setattr(self, name, value)
        rss = energy.peak_rss_mib(self.stagedir)
        if rss is not None:
            self.perf_variables['max_rss_MiB'] = \
                sn.make_performance_function(lambda: rss, 'MiB')
        try:
            joules, seconds, label = energy.run_energy(
                self.stagedir, self.metrics().get('timed_window'),
                self.layout.num_nodes)
        except energy.NoEnergy as why:
            self.energy_counter = f'none: {why}'
            return
        self.energy_counter = label
        throughput = self.throughput_metric
        self.perf_variables['energy_J'] = sn.make_performance_function(
            lambda: joules, 'J')
        self.perf_variables['avg_power_W'] = sn.make_performance_function(
            lambda: joules / seconds, 'W')
        self.perf_variables['energy_per_sample_J'] = \
            sn.make_performance_function(
                lambda: joules / seconds / self.metric(throughput), 'J')

    @run_before('performance')
    def record_loss_curve(self):
        self.loss_curve = references.format_loss_curve(
            self.metrics().get('losses') or [])

    def check_performance(self):
        '''ReFrame's performance check, then the loss curve against its
        reference. A figure below a reference from history fails naming
        the runs it came from; a loss curve that leaves its reference
        fails as a numerics regression, with the step.'''
        source, curve = references.history_entry(
            self.references_file, type(self).__name__,
            self.current_partition.fullname, self.reference_case)
        try:
            super().check_performance()
        except PerformanceError as err:
            if source:
                raise PerformanceError(
                    f'{err}; reference from {self.references_file} '
                    f'({self.reference_case!r}): {source}') from None
            raise
        if self.is_dry_run():
            return
        departure = references.loss_curve_departure(
            self.metrics().get('losses') or [], curve)
        if departure:
            raise PerformanceError(
                f'numerics regression: {departure} (reference curve of '
                f'{curve["runs"]} runs in {self.references_file}, '
                f'{self.reference_case!r})')

    def _utilisation(self, flops_per_sample, peak_per_node, nodes):
        throughput = self.metrics()[self.throughput_metric]
        return 100 * throughput * flops_per_sample / (peak_per_node * nodes)

    # Log reading, once per test case
    def log_text(self):
        '''The job's stdout and stderr (the programs log to either).'''
        if getattr(self, '_log_text', None) is None:
            parts = []
            for name in (self.stdout.evaluate(), self.stderr.evaluate()):
                path = os.path.join(self.stagedir, name)
                if os.path.exists(path):
                    with open(path, errors='replace') as fp:
                        parts.append(fp.read())
            self._log_text = '\n'.join(parts)

        return self._log_text

    def metrics(self):
        if getattr(self, '_metrics', None) is None:
            self._metrics = self.extract_metrics(self.log_text())

        return self._metrics

    def metric(self, name):
        value = self.metrics()[name]
        if value is None:
            raise SanityError(f'{name}: not found in the log')
        return value

    @sanity_function
    def assert_training_ran(self):
        '''The job ended by itself, exited 0, no rank died or raised, and
        the log passes the workload's checks; else a one-line reason.'''
        text = self.log_text()
        reason = failures.failure_reason(text, self.job.state,
                                         self.job.exitcode)
        if reason:
            raise SanityError(self.failure_message(text, reason))

        problems = self.device_problems() + self.log_problems(text)
        if problems:
            raise SanityError('; '.join(problems))

        return True

    def device_problems(self):
        '''Why the ranks' ``device`` records do not show the partition's
        devices (:func:`hpctestlib_ml.device_check.device_problems`); []
        where they do, or where the program prints no records.'''
        if not self.prints_device_records():
            return []
        return device_check.device_problems(
            self.device_records(), 'gpu' if self.uses_gpus else 'cpu',
            self.layout.world_size, self.current_partition.fullname,
            self.partition_gpu_model())

    def failure_message(self, text, reason):
        '''*reason*, with the exit code and the fix where the suite knows it.'''
        end = failures.job_end(text, self.job.state)
        if end and end.kind == 'timeout':
            limit = (f'{self.time_limit:g} s' if self.time_limit else
                     "the partition's default")
            reason += (f': the time limit was {limit}; raise it with '
                       f'-S time_limit= or run fewer -S steps=')
        exitcode = self.job.exitcode
        prefix = ('job failed' if exitcode in (0, None) else
                  f'job failed (exit code {exitcode})')
        return f'{prefix}: {reason}'

    # What each workload provides
    #: Name of the metric that is samples/s over all ranks (for MFU).
    throughput_metric = 'throughput_avg'

    #: Metrics of the whole run (MMoCLIP's total time, MLPerf's run time):
    #: not reported at size ``short``, whose figures are the steady-state
    #: ones.
    whole_run_metrics = ()

    def size_table(self):
        ''':attr:`sizes` with ``short`` derived from ``benchmark``
        (:data:`SHORT_SIZE`, then the workload's own ``short`` entry).'''
        sizes = dict(self.sizes)
        if 'benchmark' in sizes:
            short = {**sizes['benchmark'], **SHORT_SIZE,
                     **sizes.get('short', {})}
            sizes['short'] = {k: v for k, v in short.items()
                              if v is not None}
        return sizes

    def reference_case_key(self):
        ''':attr:`reference_case` of this case (see there).'''
        layout = self.layout
        parts = [self.resolved_size,
                 f'{layout.num_nodes}x{layout.procs_per_node}',
                 self.launch_mode, f'batch={self.batch_size}',
                 self.precision]
        parts += [f'{name}={getattr(self, name)}'
                  for name in type(self).param_space.params
                  if name not in ('scale', 'launch_mode')
                  and not name.startswith('.')]    # ReFrame's (--repeat)
        parts += [f'{name}={value}' for name, value in
                  self.reference_case_options().items()]
        if self.runs_in_container:
            parts.append('container')
        return ' '.join(map(str, parts))

    def reference_case_options(self):
        '''Settings of a workload beyond :attr:`reference_case`'s that make
        another case (Megatron's global batch and parallel layout).'''
        return {}

    def fixed_work(self):
        '''Why the benchmark's own rules fix its amount of work (so that
        ``-S steps=`` is refused at ``benchmark`` size), or None.'''
        return None

    @run_before('performance')
    def drop_whole_run_metrics(self):
        if self.resolved_size == 'short':
            for name in self.whole_run_metrics:
                self.perf_variables.pop(name, None)

    def default_size(self, part):
        '''The size ``auto`` means on *part*: ``benchmark`` with the
        ``gpu`` feature, else ``tiny``.'''
        return 'benchmark' if GPU_FEATURE in part.features else 'tiny'

    def runs_on(self, part):
        '''Whether this parameterised case runs on *part* at all (a
        workload's own parameters, e.g. a model size only GPUs run); cases
        it does not run are not generated, as for scales.'''
        return True

    def finalize_settings(self):
        '''Derive the workload's remaining settings once size and layout
        are known (called at setup, before :meth:`program_args`).'''

    def program_args(self):
        '''Arguments of the training program (unquoted).'''
        raise NotImplementedError

    def extract_metrics(self, text):
        '''Metrics from the log text: the workload's parser.'''
        raise NotImplementedError

    def log_problems(self, text):
        '''One-line reasons why the log shows a bad run; empty if none.'''
        raise NotImplementedError

    def model_flops_per_sample(self):
        '''Analytic training FLOPs per sample (no recomputation). Called
        after the run, so it may read the model's shape from the log
        (:meth:`metrics`); raise LookupError where no FLOPs are known.'''
        raise NotImplementedError

    def check_flops_known(self):
        '''At setup: raise LookupError (no MFU, with a warning) where the
        FLOPs per sample cannot be known. By default it computes them;
        workloads whose FLOPs come from the log override it.'''
        self.model_flops_per_sample()

    def recomputed_flops_factor(self):
        '''Executed FLOPs over model FLOPs when activations are recomputed:
        4/3 (one more forward per three); ``hfu`` is ``mfu`` times this.'''
        return RECOMPUTE_FACTOR / TRAINING_FACTOR

    def recomputes_activations(self):
        '''Whether the run recomputes the forward pass in the backward
        (activation checkpointing): then ``hfu`` is reported beside ``mfu``,
        at 4/3 of it.'''
        return False
