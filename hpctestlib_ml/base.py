"""MLTrainingTest: the suite's training test, composed of ReFrame plugins;
ComponentTest: the same test for a component benchmark.

Every workload derives from :class:`MLTrainingTest` and says only what is
its own (:class:`~hpctestlib_ml.plugins.workload.WorkloadInterface`): the
program and its arguments, its sizes, how to read its log, its FLOPs per
sample. Each plugin of :mod:`hpctestlib_ml.plugins` owns one job and its
variables; the decisions are pure modules (:mod:`~hpctestlib_ml.layout`,
:mod:`~hpctestlib_ml.sizes`, :mod:`~hpctestlib_ml.launch`, ...). This
module only composes them and orders the setup.
"""
import reframe as rfm
from reframe.core.builtins import run_after

from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.plugins import (Answers, Containers, DevicePrecision,
                                   Energy, HangWatch, JobLog, Launching,
                                   MemoryFit, Placement, Provenance,
                                   References, Sanity, Settings, Sizing,
                                   Utilisation, WorkloadInterface)


class MLTrainingTest(rfm.RunOnlyRegressionTest, WorkloadInterface, JobLog,
                     Settings, Placement, Sizing, DevicePrecision, MemoryFit,
                     Launching, HangWatch, Containers, Utilisation,
                     Provenance, Energy, References, Answers, Sanity):
    '''Base of the suite's training tests.

    A workload sets ``workload`` (its declaration's name,
    :mod:`hpctestlib_ml.registry`: program, sizes, parser, capabilities)
    and implements ``program_args``, ``log_problems`` and
    ``model_flops_per_sample`` (by stage:
    :class:`~hpctestlib_ml.plugins.workload.WorkloadInterface`).

    .. list-table:: Summary
       :header-rows: 0

       * - Parameters
         - ``scale`` (:data:`~hpctestlib_ml.constants.SCALES`),
           ``launch_mode`` (``per_task``, ``torchrun``): Placement
       * - Variables
         - Placement: ``num_nodes``, ``procs_per_node``, ``gpus_per_node``,
           ``threads_per_rank``; Sizing: ``size``, ``batch_size``,
           ``precision``, ``steps``, ``resolved_size``, ``device``;
           MemoryFit: ``memory_check``, ``memory_estimated``; Launching:
           ``python``, ``python_path``; HangWatch: ``hang_bound_s``;
           Containers: ``runs_in_container``, ``container_image``; Utilisation: ``device_ran``,
           ``mfu_peak``, ``slowest_rank``; Provenance: ``suite_version``,
           ``framework_versions``, ``gpu_driver``, ``cuda_version``,
           ``nccl_version``, ``env_switches``; Energy:
           ``energy_counter``; References: ``reference_case``,
           ``loss_curve``, ``references_file``, ``reference_noise_pct``,
           ``session_id``; Answers: ``answer_digest``,
           ``wrong_answer``; WorkloadInterface:
           ``workload``, ``program``, ``framework``,
           ``departures``, ``reference_precision``
       * - Metrics
         - the workload's own, and where known ``mfu``, ``hfu``,
           ``data_share``, ``gpu_mem_peak_MiB``, ``rank_compute_spread``,
           ``max_rss_MiB``,
           ``energy_J``, ``avg_power_W``, ``energy_per_sample_J``
       * - Partition extras read
         - ``max_nodes``, ``scales``, ``rendezvous_address``,
           ``device_peak_flops``, ``cpu_peak_flops``,
           ``device_memory_gib``, ``container_images``, ``gpu_vendor``,
           ``reference_noise_pct`` (the noise floor of references from
           history, percent; default 3), and each workload's data and
           program keys
       * - System features
         - ``gpu`` (size ``auto`` is ``benchmark`` there, else ``tiny``)
       * - Environment features
         - ``+torch`` (``+tensorflow`` for TensorFlow workloads;
           ``+container`` for the ``*Container`` checks, on partitions
           with the Apptainer platform)
    '''

    valid_systems = ['*']
    valid_prog_environs = ['+torch']

    #: ReFrame's own performance check runs non-strict so that
    #: :meth:`~hpctestlib_ml.plugins.references.References.fail_on_references`
    #: runs after it and raises its failures with the reference's source.
    strict_check = False

    @run_after('setup')
    def configure_job(self):
        '''The setup steps, in the order they depend on each other: the
        user's settings checked, the layout, then the size (which the
        workload's settings follow), the input paths, the memory fit, the
        case key, the job's resources, the launch command and
        environment, the hang watch, the container, and the figures.'''
        self.check_settings()
        self.refuse_unused_image()
        self.resolve_layout()
        self.refuse_overwritten()
        self.resolve_size()
        self.check_inputs()
        self.skip_if_it_cannot_fit()
        self.reference_case = self.reference_case_key()
        self.set_job_layout()
        self.set_launch_command()
        self.set_device_env()
        self.set_hang_watch()
        if self.runs_in_container:
            self.use_container()
        self.add_utilisation_metrics()
        self.add_record_metrics()


class ComponentTest(MLTrainingTest):
    '''Base of the component benchmarks (collectives, matrix products,
    storage): the same plugins as the training tests (scales, launch
    modes, sizes, references, provenance, energy, sanity), so that their
    figures land in the same perflogs beside the training figures they
    explain, with what a component is not: it trains no model (no MFU, no
    FLOPs per sample), reads no batches (no ``data_share``), counts no
    samples (``energy_J`` and ``avg_power_W`` but no energy per sample) and
    logs no loss (the common log checks ask for none).

    A component sets ``workload``, declares its program, parser and sizes
    (with ``steps``: the timed iterations) in the registry (the parser
    read by ``extract_metrics``: a :class:`~hpctestlib_ml.metrics.TrainingLog`
    with ``steps`` its iterations, ``world_size``, ``figures``), and implements
    ``program_args`` and ``case_settings`` (what makes another case of it in
    ``reference_case``); :meth:`log_problems` checks the ranks and iterations
    and asks the component for its own problems (:meth:`component_problems`).

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``batch_size`` is 1 (a component has no batch)
       * - Metrics
         - the component's own; ``mfu``, ``hfu``, ``data_share`` and
           ``energy_per_sample_J`` never
       * - Partition extras read
         - the component's own
    '''

    #: No batch: Sizing asks for a positive one, and the perflog's column
    #: stays a number.
    batch_size = 1

    def add_utilisation_metrics(self):
        '''No MFU: a component trains no model.'''

    def model_flops_per_sample(self):
        raise LookupError(f'{self.workload} is a component benchmark: it '
                          f'trains no model')

    def log_problems(self, text):
        '''Every rank reported and every iteration ran
        (:func:`~hpctestlib_ml.metrics.common_problems`, no loss asked
        for), then :meth:`component_problems`.'''
        log = self.metrics()
        return (common_problems(log, self.steps, self.layout.world_size) +
                self.component_problems(log))

    def component_problems(self, log):
        '''The component's own reasons why *log* shows a bad run.'''
        return []
