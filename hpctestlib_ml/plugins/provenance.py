"""Provenance and energy: what the job found on the node, logged with
every result, and the energy of the timed steps (the readers:
:mod:`hpctestlib_ml.provenance`, :mod:`hpctestlib_ml.energy`)."""
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import device_check, energy, provenance


class Provenance(RegressionTestPlugin):
    '''The software a result came from, each field logged with it.'''

    #: The suite's version and commit (``0.1.0+g1a2b3c4``, ``.dirty``
    #: where the tree has changes).
    #:
    #: :type: :class:`str`
    #: :default: set at init
    suite_version = variable(str, value='')

    #: The framework and its libraries as the job imported them
    #: (``torch=2.11.0;transformers=5.17.0``).
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    framework_versions = variable(str, value='')

    #: The GPU driver the node runs (``580.159.04 (CUDA 13.0)``,
    #: ``ROCm 6.2``).
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    gpu_driver = variable(str, value='')

    #: The CUDA (or HIP) runtime the framework runs on.
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    cuda_version = variable(str, value='')

    #: The NCCL (RCCL) version the ranks loaded, with its transport where
    #: NCCL's log names it (``2.28.9 (Socket)``).
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    nccl_version = variable(str, value='')

    #: The environment switches that change performance, as the job saw
    #: them (``NCCL_*``, ``OMP_NUM_THREADS``, malloc settings, ...).
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    env_switches = variable(str, value='')

    @run_after('init')
    def record_suite_version(self):
        self.suite_version = provenance.suite_version()

    @run_before('run')
    def name_the_logged_packages(self):
        '''The packages of the workload's declaration, whose versions the
        job's provenance logs beside the framework's
        (``HPCML_PROVENANCE_PACKAGES``).'''
        self.env_vars['HPCML_PROVENANCE_PACKAGES'] = ' '.join(
            self.declaration().logged_packages)

    @run_after('run')
    def read_provenance(self):
        '''The job's provenance file, and the versions the log names: read
        once the job has ended (ReFrame runs the hooks after ``run`` after
        the job's end), before its sanity, which compares answers
        against the known-good ones of the same software stack
        (:class:`~hpctestlib_ml.plugins.answers.Answers`).'''
        facts = provenance.job_provenance(
            self.stagedir, log_text=self.log_text(), framework=self.framework,
            loaded_nccl=device_check.loaded_nccl(self.device_records()))
        for name, value in facts.items():
            setattr(self, name, value)


class Energy(RegressionTestPlugin):
    '''Energy and host memory of a run, from the node samplers.'''

    #: The energy counters of the figures (``rapl(2 packages)``,
    #: ``nvml(4 GPUs)``), or ``none: <reason>``.
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    energy_counter = variable(str, value='')

    @run_before('performance')
    def add_energy_metrics(self):
        '''``max_rss_MiB`` (the largest training process the node samplers
        saw) and ``energy_J``, ``avg_power_W`` and ``energy_per_sample_J``
        of the timed steps where the nodes had energy counters (no energy
        per sample where the declaration has no ``throughput_metric``), else
        :attr:`energy_counter` says why not.'''
        rss = energy.peak_rss_mib(self.stagedir)
        if rss is not None:
            self.perf_variables['max_rss_MiB'] = \
                sn.make_performance_function(lambda: rss, 'MiB')
        try:
            joules, seconds, label = energy.run_energy(
                self.stagedir, self.metrics().timed_window,
                self.layout.num_nodes)
        except energy.NoEnergy as why:
            self.energy_counter = f'none: {why}'
            return
        self.energy_counter = label
        throughput = self.declaration().throughput_metric
        self.perf_variables['energy_J'] = sn.make_performance_function(
            lambda: joules, 'J')
        self.perf_variables['avg_power_W'] = sn.make_performance_function(
            lambda: joules / seconds, 'W')
        if throughput is None:          # a component: no samples
            return
        self.perf_variables['energy_per_sample_J'] = \
            sn.make_performance_function(
                lambda: joules / seconds / self.metric(throughput), 'J')
