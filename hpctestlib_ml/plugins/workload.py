"""WorkloadInterface: what a workload declares, and its log, read once.

The bottom plugin: every other plugin may call what is declared here, and
none of them is imported here (so the plugins form no import cycle).
"""
import os

from reframe.core.builtins import variable
from reframe.core.exceptions import SanityError
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml.flops import RECOMPUTE_FACTOR, TRAINING_FACTOR
from hpctestlib_ml.parsers import hpcml_records


class WorkloadInterface(RegressionTestPlugin):
    '''What each workload says about itself (its program, sizes, parser,
    FLOPs), and the job's log, read once per case.

    A workload sets :attr:`workload`, :attr:`program` and :attr:`sizes`
    and implements, by the stage that calls them:

    - init: :meth:`runs_on` (which parameterised cases exist on a
      partition);
    - setup, after the size and layout are resolved: :meth:`size_table`,
      :meth:`fixed_work`, :meth:`finalize_settings`,
      :meth:`case_settings`, :meth:`reference_case_options`,
      :meth:`memory_estimate`,
      :meth:`program_args`, :meth:`check_flops_known`;
    - sanity and performance: :meth:`extract_metrics`,
      :meth:`log_problems`, :meth:`model_flops_per_sample`.
    '''

    #: Workload name: the references file and ``hpcml extract`` use it.
    #:
    #: :type: :class:`str`
    #: :default: required
    workload = variable(str)

    #: Python module under ``src/`` that is the training program.
    #:
    #: :type: :class:`str`
    #: :default: required
    program = variable(str)

    #: Size name -> defaults for variables the user left unset, and
    #: ``time_limit`` (:mod:`hpctestlib_ml.sizes`).
    #:
    #: :type: :class:`dict`
    #: :default: ``{}``
    sizes = variable(dict, value={})

    #: Framework of the program: its container image is built from
    #: ``containers/<framework>.def``.
    #:
    #: :type: :class:`str`
    #: :default: ``'pytorch'``
    framework = variable(str, value='pytorch')

    #: How this run departs from the upstream benchmark's own
    #: configuration beyond the suite's measurement window (e.g. mock data
    #: where it trains on a dataset, a kernel the node lacks); 'none'
    #: where the workload checks and nothing does, '' where it does not
    #: check. Logged with every result.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    departures = variable(str, value='')

    #: The precision the upstream reference program trains in, beside
    #: ``precision`` (what this run trained in), e.g. ``fp32`` where the
    #: benchmark size trains mixed as the MLPerf submissions do
    #: (:mod:`hpctestlib_ml.precisions`); '' where the workload records
    #: none. Logged with every result.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    reference_precision = variable(str, value='')

    #: Name of the metric that is samples/s over all ranks (MFU, energy
    #: per sample).
    throughput_metric = 'throughput_avg'

    #: The fewest ranks a case means anything at (one rank's collective
    #: moves nothing): scales of fewer ranks are not generated, and a
    #: layout of fewer (``-S num_nodes=``) fails with the reason.
    min_world_size = 1

    #: Whether the program's steps wait for data, so that the share of
    #: the step time spent waiting is reported (``data_share``); a
    #: component benchmark's iterations read no batches.
    reports_data_share = True

    #: Whether the program computes on its GPUs, so that the largest
    #: device memory a rank held is reported on GPU partitions
    #: (``gpu_mem_peak_MiB``); a component that only moves data (Storage)
    #: holds none.
    reports_gpu_memory = True

    #: Metrics of the whole run (MMoCLIP's total time, MLPerf's run time):
    #: not reported at size ``short``, whose figures are the steady-state
    #: ones.
    whole_run_metrics = ()

    # The log, read once per case

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
        '''The log as the workload's parser reads it, once per case: a
        :class:`~hpctestlib_ml.metrics.TrainingLog`.'''
        if getattr(self, '_metrics', None) is None:
            self._metrics = self.extract_metrics(self.log_text())
        return self._metrics

    def metric(self, name):
        '''Figure *name* of :meth:`metrics` (its ``figures``); a sanity
        error where the log has none.'''
        value = self.metrics().figures.get(name)
        if value is None:
            raise SanityError(f'{name}: not found in the log')
        return value

    def log_records(self, type_):
        '''The ranks' ``[hpcml]`` records of type *type_* in the log, read
        once per case.'''
        if getattr(self, '_log_records', None) is None:
            self._log_records = {}
        if type_ not in self._log_records:
            self._log_records[type_] = hpcml_records.records(
                self.log_text(), type_)
        return self._log_records[type_]

    def device_records(self):
        '''The ranks' ``[hpcml] device`` records ([] where the program
        prints none).'''
        return self.log_records('device')

    # What each workload provides

    def runs_on(self, part):
        '''Whether this parameterised case runs on *part* at all (a
        workload's own parameters, e.g. a model size only GPUs run); cases
        it does not run are not generated, as for scales.'''
        return True

    def size_table(self):
        ''':attr:`sizes` with ``short`` derived from ``benchmark``
        (:func:`hpctestlib_ml.sizes.size_table`).'''
        from hpctestlib_ml import sizes
        return sizes.size_table(self.sizes)

    def fixed_work(self):
        '''Why the benchmark's own rules fix its amount of work (so that
        ``-S steps=`` is refused at ``benchmark`` size), or None.'''
        return None

    def finalize_settings(self):
        '''Derive the workload's remaining settings once size and layout
        are known (at setup, before :meth:`program_args`).'''

    def case_settings(self):
        '''What, beside size, layout and launch mode, makes another case of
        this workload (``reference_case``): the per-rank batch and the
        precision.'''
        return [f'batch={self.batch_size}', self.precision]

    def reference_case_options(self):
        '''Settings of a workload beyond ``reference_case``'s that make
        another case (Megatron's global batch and parallel layout).'''
        return {}

    def memory_estimate(self):
        '''The case's :class:`~hpctestlib_ml.memory_estimate.
        MemoryEstimate` per device (at setup, after
        :meth:`finalize_settings`), or None where the workload has none.'''
        return None

    def prints_device_records(self):
        '''Whether the program prints the suite's ``[hpcml]`` records
        (every program of ``src/`` does; an upstream program of a site's,
        such as Megatron-LM's ``pretrain_gpt.py``, does not).'''
        return True

    def prints_rank_compute(self):
        '''Whether the program prints each rank's ``[hpcml]
        rank_compute`` record (its own compute per step: those of
        ``src/mlperf_train`` and ``src/torchvision_resnet50``, whose models
        are timed by ``src/rank_compute.py``).'''
        return False

    def container_directories(self):
        '''Directories the program reads or writes outside the repository
        and its stage directory, bind-mounted at their own paths when it
        runs in a container (shell variables are the job's).'''
        return []

    def program_args(self):
        '''Arguments of the training program (unquoted).'''
        raise NotImplementedError

    def extract_metrics(self, text):
        '''The log *text* read by the workload's parser (its declaration's,
        :mod:`hpctestlib_ml.workloads`): a :class:`~hpctestlib_ml.metrics.
        TrainingLog`. A workload whose parser needs more than the text
        overrides it.'''
        from hpctestlib_ml import workloads
        return workloads.get(self.workload).parser.training_log(text)

    def log_problems(self, text):
        '''One-line reasons why the log shows a bad run; empty if none:
        :func:`hpctestlib_ml.metrics.common_problems` (steps, ranks, loss),
        then the workload's own.'''
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

    def recomputes_activations(self):
        '''Whether the run recomputes the forward pass in the backward
        (activation checkpointing): then ``hfu`` is reported beside
        ``mfu``.'''
        return False

    def recomputed_flops_factor(self):
        '''Executed FLOPs over model FLOPs when activations are recomputed:
        4/3 (one more forward per three).'''
        return RECOMPUTE_FACTOR / TRAINING_FACTOR
