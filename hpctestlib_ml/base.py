"""MLTrainingTest: the suite's training test, composed of ReFrame plugins.

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

from hpctestlib_ml.plugins import (Containers, Energy, Launching, Placement,
                                   Provenance, References, Sanity, Sizing,
                                   Utilisation, WorkloadInterface)


class MLTrainingTest(rfm.RunOnlyRegressionTest, WorkloadInterface,
                     Placement, Sizing, Launching, Containers, Utilisation,
                     Provenance, Energy, References, Sanity):
    '''Base of the suite's training tests.

    A workload sets ``workload``, ``program`` and ``sizes`` and implements
    ``program_args``, ``extract_metrics``, ``log_problems`` and
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
           ``precision``, ``steps``, ``memory_check``, ``resolved_size``,
           ``device``, ``memory_estimated``; Launching: ``python``,
           ``python_path``; Containers: ``runs_in_container``,
           ``container_image``; Utilisation: ``device_ran``,
           ``mfu_peak``, ``slowest_rank``; Provenance: ``suite_version``,
           ``framework_versions``, ``gpu_driver``, ``cuda_version``,
           ``nccl_version``, ``env_switches``; Energy:
           ``energy_counter``; References: ``reference_case``,
           ``loss_curve``, ``references_file``; WorkloadInterface:
           ``workload``, ``program``, ``sizes``, ``framework``,
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
           and each workload's data and program keys
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
    #: :meth:`~hpctestlib_ml.plugins.references.References.
    #: fail_on_references` runs after it and raises its failures with the
    #: reference's source.
    strict_check = False

    @run_after('setup')
    def configure_job(self):
        '''The setup steps, in the order they depend on each other: the
        layout, then the size (which the workload's settings follow), the
        memory fit, the case key, the job's resources, the launch command
        and environment, the container, and the figures.'''
        self.resolve_layout()
        self.resolve_size()
        self.skip_if_it_cannot_fit()
        self.reference_case = self.reference_case_key()
        self.set_job_layout()
        self.set_launch_command()
        self.set_device_env()
        if self.runs_in_container:
            self.use_container()
        self.add_utilisation_metrics()
        self.add_record_metrics()
