"""WorkloadInterface: the check's side of a workload, and its declaration
read.

A bottom plugin (with :mod:`~hpctestlib_ml.plugins.log`): every other
plugin may call what is declared here, and none of them is imported here
(so the plugins form no import cycle).
"""
from reframe.core.builtins import run_after, variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import registry, sizes


class WorkloadInterface(RegressionTestPlugin):
    '''What each workload's check does its own way (its program's
    arguments, its log's problems, its FLOPs per sample), beside what its
    declaration says (:meth:`declaration`: program, sizes, parser,
    capabilities).

    A workload sets :attr:`workload` (its name in
    :mod:`hpctestlib_ml.registry`) and implements, by the stage that calls
    them:

    - init: :meth:`runs_on` (which parameterised cases exist on a
      partition);
    - setup, after the size and layout are resolved: :meth:`size_table`,
      :meth:`fixed_work`, :meth:`finalize_settings`,
      :meth:`case_settings`, :meth:`reference_case_options`,
      :meth:`memory_estimate`,
      :meth:`program_args`, :meth:`check_flops_known`;
    - sanity and performance: :meth:`extract_metrics`,
      :meth:`log_problems`, :meth:`model_flops_per_sample` (and, where
      the run recomputes activations, Utilisation's
      ``recomputes_activations``).
    '''

    #: Workload name: the references file and ``hpcml extract`` use it.
    #:
    #: :type: :class:`str`
    #: :default: required
    workload = variable(str)

    #: Python module under ``src/`` that is the training program.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the declaration's, set at init)
    program = variable(str, type(None), value=None)

    #: Framework of the program: its container image is built from
    #: ``containers/<framework>.def``.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the declaration's, set at init)
    framework = variable(str, type(None), value=None)

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

    def declaration(self):
        '''The workload's :class:`~hpctestlib_ml.registry.Workload`: its
        sizes, parser, headline and capabilities, which the plugins
        read.'''
        return registry.get(self.workload)

    @run_after('init')
    def read_declaration(self):
        ''':attr:`program` and :attr:`framework` of the declaration, where
        the check sets neither.'''
        declared = self.declaration()
        if self.program is None:
            self.program = declared.program
        if self.framework is None:
            self.framework = declared.framework

    # What each workload provides

    def runs_on(self, part):
        '''Whether this parameterised case runs on *part* at all (a
        workload's own parameters, e.g. a model size only GPUs run); cases
        it does not run are not generated, as for scales.'''
        return True

    def size_table(self):
        '''The declaration's sizes with ``short`` derived from
        ``benchmark`` (:func:`hpctestlib_ml.sizes.size_table`).'''
        return sizes.size_table(self.declaration().sizes)

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
        '''The case's :class:`~hpctestlib_ml.memory_estimate.MemoryEstimate`
        per device (at setup, after :meth:`finalize_settings`), or None where
        the workload has none.'''
        return None

    def prints_device_records(self):
        '''Whether the program prints the suite's ``[hpcml]`` records
        (every program of ``src/`` does; an upstream program of a site's,
        such as Megatron-LM's ``pretrain_gpt.py``, does not).'''
        return True

    def container_directories(self):
        '''Directories the program reads or writes outside the repository
        and its stage directory, bind-mounted at their own paths when it
        runs in a container (shell variables are the job's).'''
        return []

    def program_args(self):
        '''Arguments of the training program (unquoted).'''
        raise NotImplementedError

    def extract_metrics(self, text):
        '''The log *text* read by the workload's parser (its
        declaration's): a :class:`~hpctestlib_ml.metrics.TrainingLog`. A
        workload whose parser needs more than the text overrides it.'''
        return self.declaration().parser.training_log(text)

    def log_problems(self, text):
        '''One-line reasons why the log shows a bad run; empty if none:
        :func:`hpctestlib_ml.metrics.common_problems` (steps, ranks, loss),
        then the workload's own.'''
        raise NotImplementedError

    def model_flops_per_sample(self):
        '''Analytic training FLOPs per sample (no recomputation). Called
        after the run, so it may read the model's shape from the log
        (:meth:`~hpctestlib_ml.plugins.log.JobLog.metrics`); raise
        LookupError where no FLOPs are known.'''
        raise NotImplementedError

    def check_flops_known(self):
        '''At setup: raise LookupError (no MFU, with a warning) where the
        FLOPs per sample cannot be known. By default it computes them;
        workloads whose FLOPs come from the log override it.'''
        self.model_flops_per_sample()
