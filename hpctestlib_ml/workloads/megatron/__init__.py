"""GPT pretraining with Megatron: the CARAML LLM benchmark, as a check.

On GPU partitions the check runs Megatron-LM's ``pretrain_gpt.py`` (path
from ``-S megatron_lm=`` or the partition's ``extras['megatron_lm']``) at
the CARAML model sizes; elsewhere (and where Megatron-LM is absent)
``src/gpt_pretrain`` trains Megatron-Core's GPTModel with the same
arguments and log line. The model size is a parameter: ``tiny`` runs where
the size resolves to ``tiny`` (CPU partitions, ``--mode smoke``), the CARAML
sizes where it resolves to ``benchmark``.

How it runs: CARAML's whole argument set per size
(:mod:`hpctestlib_ml.registry.megatron.caraml`, compared with CARAML's YAML by
``tests/test_caraml_args.py``): fp16 for 800M and 13B, bf16 for 175B, with
CARAML's loss scaler, Adam and cosine schedule in samples, sequence
parallelism, selective recomputation, the distributed optimizer and flash
attention, ``CUDA_DEVICE_MAX_CONNECTIONS=1``. The Megatron-Core fallback
runs the same as far as Megatron-Core goes and says where it cannot
(perflog field ``departures``).

The workload's declaration, its models (shapes, layouts, arguments, FLOPs)
and their sources: :mod:`hpctestlib_ml.registry.megatron`. Here: the test
class, its parallel layout (:mod:`.parallel`) and what it runs
(:mod:`.program`).
"""
from reframe.core.builtins import (parameter, performance_function,
                                   run_after, run_before, variable)

from hpctestlib_ml import inputs
from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.parsers import megatron as parser
from hpctestlib_ml.plugins.placement import partition_facts
from hpctestlib_ml.registry.megatron import benchmark_precision, caraml
from hpctestlib_ml.registry.megatron.models import (CARAML_POSITION_EMBEDDING,
                                                    MODELS, flops_per_token)
from hpctestlib_ml.sizes import default_size
from hpctestlib_ml.workloads.megatron.parallel import (ParallelLayout,
                                                       model_fits)
from hpctestlib_ml.workloads.megatron.program import (departures,
                                                      pretrain_arguments,
                                                      program_and_data)

#: The jubench LLM metric: seconds to train this many tokens.
JUBENCH_TOKENS = 20_000_000


def log_problems(log, train_iters, world_size):
    '''One-line reasons why a Megatron log (a
    :class:`~hpctestlib_ml.metrics.TrainingLog` of
    :func:`~hpctestlib_ml.parsers.megatron.training_log`) shows a bad run of
    *train_iters* iterations on *world_size* ranks; [] if none: the common
    checks, once Megatron's iteration lines are there at all.'''
    if not log.figures['iterations']:
        return ['no Megatron iteration line in the log']
    return common_problems(log, train_iters, world_size)


class MegatronGPTTraining(ParallelLayout, MLTrainingTest):
    '''Megatron GPT pretraining on mock or indexed data.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - ``model_size``
           (:data:`~hpctestlib_ml.registry.megatron.models.MODELS`)
       * - Variables
         - ``global_batch_size``, ``tensor_parallel``, ``pipeline_parallel``
           (:class:`~.parallel.ParallelLayout`), ``megatron_lm``,
           ``position_embedding_type``, ``untie_embeddings``, ``data_path``;
           set at setup: ``data_parallel``, ``model_shape``, ``vocab``,
           ``dataset``, ``input_sources``
       * - Metrics
         - ``tokens_per_second`` (tokens/s), ``time_per_iteration_secs`` (s),
           ``tflops_per_gpu`` (TFLOP/s), ``printed_tflops_per_gpu``
           (TFLOP/s), ``time_per_20m_tokens_secs`` (s)
       * - Partition extras
         - ``megatron_lm``, ``megatron_data``
    '''

    workload = 'megatron'

    #: Model: ``tiny`` (CPU stand-in), a CARAML size (800M, 13B, 175B),
    #: Llama 3 (llama3-8B, llama3-70B) or GPT-J (gptj-6B).
    model_size = parameter(list(MODELS))

    #: A Megatron-LM checkout whose ``pretrain_gpt.py`` runs; default: the
    #: partition's ``extras['megatron_lm']``; none: Megatron-Core's model.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (``extras['megatron_lm']``)
    megatron_lm = variable(str, type(None), value=None)

    #: Position embeddings (``--position-embedding-type``): ``rope`` as
    #: CARAML runs, or Megatron-LM's default ``learned_absolute``.
    #:
    #: :type: :class:`str`
    #: :default: ``'rope'``
    position_embedding_type = variable(str, value=CARAML_POSITION_EMBEDDING)

    #: A separate output layer instead of one tied to the word embeddings
    #: (``--untie-embeddings-and-output-weights``; CARAML ties them).
    #:
    #: :type: :class:`bool`
    #: :default: :obj:`False`
    untie_embeddings = variable(str, bool, value=False)

    #: Megatron indexed dataset (path prefix); default: the partition's
    #: ``extras['megatron_data']['data_path']``; none: mock data.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (``extras['megatron_data']``)
    data_path = variable(str, type(None), value=None)

    #: The indexed dataset the case trains on (``data_path``,
    #: ``vocab_file``, ``merge_file``): ``extras['megatron_data']`` with
    #: ``-S data_path`` over it, set at setup; no ``data_path``: mock data.
    #:
    #: :type: :class:`dict`
    #: :default: ``{}``
    dataset = variable(dict, value={})

    #: Where ``megatron_lm`` and ``data_path`` came from (``-S`` or the
    #: partition's extras), as a missing path's message names it; set at
    #: setup.
    #:
    #: :type: :class:`dict`
    #: :default: ``{}``
    input_sources = variable(dict, value={})

    def runs_on(self, part):
        size = (self.size if self.size != 'auto' else
                default_size(part.features))
        return model_fits(self.model_size, size, self.scale,
                          partition_facts(part), self.num_nodes)

    @run_after('init')
    def use_the_models_micro_batch(self):
        if self.batch_size is None and self.model_size != 'tiny':
            self.batch_size = MODELS[self.model_size]['micro_batch']

    def size_table(self):
        '''The sizes, with the benchmark precision of the model size as
        CARAML runs it (fp16 for 800M and 13B, bf16 for 175B).'''
        sizes = super().size_table()
        precision = benchmark_precision(self.model_size)
        for name in ('benchmark', 'short'):
            if name in sizes:
                sizes[name] = {**sizes[name], 'precision': precision}
        return sizes

    def reference_case_options(self):
        '''The layout, and the program: Megatron-LM's figures (CARAML's,
        jubench's) are not the fallback's.'''
        return {**super().reference_case_options(),
                'program': ('megatron-lm' if self.megatron_lm else
                            'megatron-core')}

    def finalize_settings(self):
        self.resolve_parallel_layout(self.model_size, self.layout.world_size,
                                     self.batch_size)
        self.input_sources = {
            'megatron_lm': ('-S megatron_lm' if self.megatron_lm else
                            "extras['megatron_lm']"),
            'data_path': ('-S data_path' if self.data_path else
                          "extras['megatron_data']['data_path']")}
        self.megatron_lm, self.dataset = program_and_data(
            self.model_size, self.current_partition.extras,
            self.megatron_lm, self.data_path)
        self.env_vars.update(caraml.ENVIRONMENT)

    def input_paths(self):
        '''The Megatron-LM checkout (its ``pretrain_gpt.py``) and the
        indexed dataset with its vocabulary, where set.'''
        found = []
        if self.megatron_lm:
            found.append(inputs.Input(self.input_sources['megatron_lm'],
                                      self.megatron_lm, 'dir',
                                      holds=('pretrain_gpt.py',)))
        if self.dataset.get('data_path'):
            found.append(inputs.Input(self.input_sources['data_path'],
                                      self.dataset['data_path'], 'prefix'))
            found += [inputs.Input(f"extras['megatron_data'][{name!r}]",
                                   self.dataset[name], 'file')
                      for name in ('vocab_file', 'merge_file')
                      if self.dataset.get(name)]
        return found

    def prints_device_records(self):
        '''Megatron-LM's ``pretrain_gpt.py`` prints its own log only; the
        Megatron-Core fallback (``src/gpt_pretrain``) prints the suite's
        records.'''
        return not self.megatron_lm

    def program_args(self):
        args = ['--megatron-lm', self.megatron_lm] if self.megatron_lm else []
        return args + pretrain_arguments(
            self.model_shape, self.tensor_parallel, self.pipeline_parallel,
            self.batch_size, self.global_batch_size, self.steps,
            self.precision, self.dataset, self.position_embedding_type,
            self.untie_embeddings)

    @run_before('performance')
    def log_departures(self):
        self.departures = departures(self.dataset, self.log_text(),
                                     self.model_shape, self.vocab)

    def model_flops_per_sample(self):
        '''Per token: the throughput metric counts tokens.'''
        return flops_per_token(self.model_shape, self.vocab)

    def extract_metrics(self, text):
        return parser.training_log(
            text, seq_length=self.model_shape['seq_length'],
            flops_per_token=self.model_flops_per_sample(),
            gpus=self.layout.world_size)

    def log_problems(self, text):
        return log_problems(self.metrics(), self.steps,
                            self.layout.world_size)

    @performance_function('s')
    def time_per_iteration_secs(self):
        '''Mean seconds per iteration, first logged iteration skipped.'''
        return self.metric('time_per_iteration_secs')

    @performance_function('tokens/s')
    def tokens_per_second(self):
        '''Global batch x sequence length / time per iteration.'''
        return self.metric('tokens_per_second')

    @performance_function('TFLOP/s')
    def tflops_per_gpu(self):
        '''Model TFLOP/s per GPU, computed by the suite: tokens/s x
        Megatron-LM's analytic FLOPs per token (the full s x s attention,
        no recomputation:
        :func:`hpctestlib_ml.flops.megatron_gpt_flops_per_token`, whose
        docstring compares the conventions) / GPUs. MFU uses the same FLOPs.'''
        return self.metric('tflops_per_gpu')

    @performance_function('TFLOP/s')
    def printed_tflops_per_gpu(self):
        '''The program's own TFLOP/s figure, as the log prints it:
        information only. Its convention is the program's: upstream
        Megatron-LM's causal-halved formula, or CARAML's patched figure
        with a 4x recompute factor (a third above model FLOPs).'''
        return self.metric('printed_tflops_per_gpu')

    @performance_function('s')
    def time_per_20m_tokens_secs(self):
        '''jubench's LLM metric: 20M tokens / tokens per second.'''
        return JUBENCH_TOKENS / self.metric('tokens_per_second')
