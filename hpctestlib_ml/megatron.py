"""GPT pretraining with Megatron: the CARAML LLM benchmark.

On GPU partitions the check runs Megatron-LM's ``pretrain_gpt.py`` (path
from ``-S megatron_lm=`` or the partition's ``extras['megatron_lm']``) at
the CARAML model sizes; elsewhere (and where Megatron-LM is absent)
``src/gpt_pretrain`` trains Megatron-Core's GPTModel with the same
arguments and log line. The model size is a parameter: ``tiny`` runs where
the size resolves to ``tiny`` (CPU partitions, ``--mode smoke``), the CARAML
sizes where it resolves to ``benchmark``.

CARAML (Jülich's "Comparison of AI accelerators" suite): GPT models with
sequence length 2048 and the GPT-2 tokenizer; data are a 790-sample OSCAR
subset as a Megatron indexed dataset (``extras['megatron_data']``), else
Megatron's mock data.

The model is Megatron-LM's GPT with CARAML's arguments
(FZJ-JSC/CARAML ``llm_training/llm_benchmark_nvidia_amd.yaml``, NVIDIA
systems): ``--position-embedding-type rope`` and otherwise Megatron-LM's
defaults (``megatron/training/arguments.py``): output layer tied to the word
embeddings, biases on, LayerNorm, GeLU MLP of 4h. Parameters of the whole
model (all tensor-parallel ranks), with the vocabulary padded for the
size's TP: 800M 908,759,040 at TP 1 (912,953,344 with Megatron-LM's default
learned absolute position embeddings, which add a 2048 x 2048 table), 13B
12,843,796,480 at TP 2, 175B 174,590,681,088 at TP 8 (``hpcml model-info
megatron --size 13B``).

Vocabulary padding: Megatron-LM pads the tokenizer's vocabulary to a
multiple of ``make_vocab_size_divisible_by`` (128) x TP, so every tensor-
parallel rank holds an equal, aligned slice: 50257 -> 50304 at TP 1, 50432
at TP 2, 50688 at TP 4 and 51200 at TP 8. The padded rows are parameters
and FLOPs like any others (Megatron's own FLOPs formula uses the padded
size, as :func:`~hpctestlib_ml.flops.megatron_gpt_flops_per_token` here).
"""
import math

from reframe.core.builtins import (parameter, performance_function,
                                   run_after, variable)

from hpctestlib_ml import flops, memory_estimate
from hpctestlib_ml.base import (BadInputError, MLTrainingTest, count,
                                partition_facts)
from hpctestlib_ml.layout import LayoutError, resolve_layout
from hpctestlib_ml.parsers import megatron as parser

#: GPT-2 BPE vocabulary; Megatron pads it to a multiple of 128 x TP (50304).
GPT2_VOCAB = 50257

#: Model sizes: shape, parallelism (TP, PP) and micro batch per GPU. The
#: CARAML sizes are its benchmark's; ``tiny`` is the suite's CPU stand-in.
MODELS = {
    'tiny': {'num_layers': 2, 'hidden_size': 256, 'num_attention_heads': 4,
             'seq_length': 128, 'tp': 1, 'pp': 1, 'micro_batch': 4},
    '800M': {'num_layers': 16, 'hidden_size': 2048, 'num_attention_heads': 8,
             'seq_length': 2048, 'tp': 1, 'pp': 1, 'micro_batch': 4},
    '13B': {'num_layers': 40, 'hidden_size': 5120, 'num_attention_heads': 32,
            'seq_length': 2048, 'tp': 2, 'pp': 2, 'micro_batch': 2},
    '175B': {'num_layers': 96, 'hidden_size': 12288, 'num_attention_heads': 96,
             'seq_length': 2048, 'tp': 8, 'pp': 8, 'micro_batch': 2},
}

#: Default global batch (samples per iteration) at benchmark size, rounded
#: to a multiple of micro batch x data-parallel size.
BENCHMARK_GLOBAL_BATCH = 2048

#: Iterations at benchmark and short size (``-S steps=`` changes them).
BENCHMARK_ITERATIONS = 20

#: The jubench LLM metric: seconds to train this many tokens.
JUBENCH_TOKENS = 20_000_000


#: CARAML's position embeddings (``--position-embedding-type rope`` on
#: NVIDIA systems; the ROCm fork's name for it is ``rotary``).
CARAML_POSITION_EMBEDDING = 'rope'


def model_arguments(shape, position_embedding_type=CARAML_POSITION_EMBEDDING,
                    untie_embeddings=False):
    '''The ``pretrain_gpt.py`` arguments that define the model of *shape*
    (an entry of :data:`MODELS`), as strings; both programs (Megatron-LM and
    the Megatron-Core fallback) build the same model from them.'''
    args = ['--num-layers', shape['num_layers'],
            '--hidden-size', shape['hidden_size'],
            '--num-attention-heads', shape['num_attention_heads'],
            '--seq-length', shape['seq_length'],
            '--max-position-embeddings', shape['seq_length'],
            '--position-embedding-type', position_embedding_type]
    if untie_embeddings:
        args.append('--untie-embeddings-and-output-weights')
    return [str(a) for a in args]


def forward_flops_per_sequence(shape, vocab):
    '''Forward FLOPs of one sequence: Megatron's training formula per token
    (:func:`~hpctestlib_ml.flops.megatron_gpt_flops_per_token`) x sequence
    length / 3 (forward + backward = 3 forwards).'''
    return flops.megatron_gpt_flops_per_token(
        shape['num_layers'], shape['hidden_size'], shape['seq_length'],
        vocab) * shape['seq_length'] / flops.TRAINING_FACTOR


def padded_vocab(vocab, tp, divisible_by=128):
    multiple = divisible_by * tp
    return int(math.ceil(vocab / multiple) * multiple)


def data_parallel_size(world, tp, pp):
    '''World size / (TP x PP); ValueError naming the fix if it does not divide.'''
    if world % (tp * pp):
        raise ValueError(f'{world} GPUs do not split into tensor parallel {tp}'
                         f' x pipeline parallel {pp} groups: use a multiple '
                         f'of {tp * pp} GPUs (-S num_nodes) or change '
                         f'-S tensor_parallel/-S pipeline_parallel')
    return world // (tp * pp)


class GptPretraining(MLTrainingTest):
    '''Megatron GPT pretraining on mock or indexed data.'''

    workload = 'megatron'
    program = 'gpt_pretrain'
    throughput_metric = 'tokens_per_second'
    sizes = {
        'tiny': {'batch_size': MODELS['tiny']['micro_batch'],
                 'time_limit': '15m'},
        'benchmark': {'precision': 'bf16', 'steps': BENCHMARK_ITERATIONS,
                      'time_limit': '1h'},
        # An iteration is a whole global batch (2048 sequences, 4.2M
        # tokens): 20 of them are minutes already (800M on 4 GPUs: ~26 s
        # each, CARAML's JEDI row).
        'short': {'steps': BENCHMARK_ITERATIONS},
    }

    #: Model: ``tiny`` (CPU stand-in) or a CARAML size (800M, 13B, 175B).
    model_size = parameter(list(MODELS))

    #: Samples per iteration over all ranks; default: 8 for ``tiny``, else
    #: 2048 rounded to a multiple of micro batch x data-parallel size.
    #:
    #: :type: :class:`int` or :obj:`None`
    global_batch_size = variable(str, int, type(None), value=None)

    #: Tensor / pipeline parallel sizes; default: the model's.
    #:
    #: :type: :class:`int` or :obj:`None`
    tensor_parallel = variable(str, int, type(None), value=None)
    pipeline_parallel = variable(str, int, type(None), value=None)

    #: A Megatron-LM checkout whose ``pretrain_gpt.py`` runs; default: the
    #: partition's ``extras['megatron_lm']``; none: Megatron-Core's model.
    #:
    #: :type: :class:`str` or :obj:`None`
    megatron_lm = variable(str, type(None), value=None)

    #: Position embeddings (``--position-embedding-type``): ``rope`` as
    #: CARAML runs, or Megatron-LM's default ``learned_absolute``.
    #:
    #: :type: :class:`str`
    position_embedding_type = variable(str, value=CARAML_POSITION_EMBEDDING)

    #: A separate output layer instead of one tied to the word embeddings
    #: (``--untie-embeddings-and-output-weights``; CARAML ties them).
    #:
    #: :type: :class:`bool`
    untie_embeddings = variable(bool, value=False)

    #: Megatron indexed dataset (path prefix); default: the partition's
    #: ``extras['megatron_data']['data_path']``; none: mock data.
    #:
    #: :type: :class:`str` or :obj:`None`
    data_path = variable(str, type(None), value=None)

    def runs_on(self, part):
        size = self.size if self.size != 'auto' else self.default_size(part)
        if (self.model_size == 'tiny') != (size == 'tiny'):
            return False
        if self.num_nodes is not None:
            # Explicit -S num_nodes: setup checks it, and says why it fails.
            return True
        model = MODELS[self.model_size]
        try:
            layout = resolve_layout(self.scale, partition_facts(part))
            data_parallel_size(layout.world_size, model['tp'], model['pp'])
        except (LayoutError, ValueError):
            return False
        return True

    @run_after('init')
    def use_the_models_micro_batch(self):
        if self.batch_size is None and self.model_size != 'tiny':
            self.batch_size = MODELS[self.model_size]['micro_batch']

    def reference_case_options(self):
        return {'global_batch_size': self.global_batch_size,
                'tp': self.tp, 'pp': self.pp}

    def finalize_settings(self):
        model = MODELS[self.model_size]
        self.model = model
        self.tp = count('tensor_parallel', self.tensor_parallel or model['tp'])
        self.pp = count('pipeline_parallel',
                        self.pipeline_parallel or model['pp'])
        try:
            self.dp = data_parallel_size(self.layout.world_size, self.tp,
                                         self.pp)
        except ValueError as err:
            raise BadInputError(str(err)) from None

        per_step = self.batch_size * self.dp
        if self.global_batch_size is None:
            target = (8 if self.resolved_size == 'tiny' else
                      BENCHMARK_GLOBAL_BATCH)
            self.global_batch_size = per_step * max(1, round(target /
                                                             per_step))
        self.global_batch_size = count('global_batch_size',
                                       self.global_batch_size)
        if self.global_batch_size % per_step:
            raise BadInputError(
                f'global batch {self.global_batch_size} is not a multiple of '
                f'micro batch {self.batch_size} x data parallel {self.dp}: '
                f'fix -S global_batch_size')

        extras = self.current_partition.extras
        if self.megatron_lm is None:
            self.megatron_lm = extras.get('megatron_lm')
        self.data = dict(extras.get('megatron_data', {}))
        if self.data_path:
            self.data['data_path'] = self.data_path
        if self.data.get('data_path') and not self.megatron_lm:
            raise BadInputError('an indexed dataset needs Megatron-LM itself:'
                                ' set -S megatron_lm= (or extras '
                                "'megatron_lm'), or leave data_path unset "
                                'for mock data')
        self.vocab = padded_vocab(GPT2_VOCAB, self.tp)
        self.train_iters = self.steps

    def memory_estimate(self):
        '''Per-device memory of the first pipeline stage
        (:func:`hpctestlib_ml.memory_estimate.megatron_estimate`): with
        Megatron-LM, its options as the case runs them (sequence parallel,
        distributed optimizer and selective recomputation at the CARAML
        sizes, none at ``tiny``, unless the case says otherwise); the
        Megatron-Core fallback has none of them.'''
        caraml = self.model_size != 'tiny'
        return memory_estimate.megatron_estimate(
            self.model, self.vocab, self.tp, self.pp, self.dp,
            self.batch_size, self.global_batch_size, self.precision,
            sequence_parallel=getattr(self, 'sequence_parallel', caraml),
            recompute_granularity=getattr(
                self, 'recompute_granularity',
                'selective' if caraml else None),
            distributed_optimizer=getattr(self, 'distributed_optimizer',
                                          caraml),
            megatron_lm=bool(self.megatron_lm),
            untie=True if self.untie_embeddings else None,
            learned_positions=(self.position_embedding_type ==
                               'learned_absolute'))

    def memory_fit_hints(self, estimate, device_gib):
        '''A smaller micro batch where one fits; more nodes where the
        distributed optimizer would shard more; larger TP or PP.'''
        hints = super().memory_fit_hints(estimate, device_gib)
        if self.megatron_lm and getattr(self, 'distributed_optimizer',
                                        self.model_size != 'tiny'):
            hints.append('more nodes (-S num_nodes=): the distributed '
                         'optimizer shards its state over data parallel '
                         f'{self.dp}')
        hints.append(f'more model parallelism (-S tensor_parallel=, -S '
                     f'pipeline_parallel=; now {self.tp} and {self.pp})')
        if not self.megatron_lm and self.model_size != 'tiny':
            hints.append('Megatron-LM itself (-S megatron_lm=): the '
                         'fallback has no sequence parallelism, '
                         'recomputation, distributed optimizer or flash '
                         'attention')
        return hints

    def prints_device_records(self):
        '''Megatron-LM's ``pretrain_gpt.py`` prints its own log only; the
        Megatron-Core fallback (``src/gpt_pretrain``) prints the suite's
        records.'''
        return not self.megatron_lm

    def program_args(self):
        m = self.model
        args = ['--megatron-lm', self.megatron_lm] if self.megatron_lm else []
        args += model_arguments(m, self.position_embedding_type,
                                self.untie_embeddings)
        args += [
            '--micro-batch-size', self.batch_size,
            '--global-batch-size', self.global_batch_size,
            '--train-iters', self.train_iters,
            '--lr', '1e-4',
            '--tensor-model-parallel-size', self.tp,
            '--pipeline-model-parallel-size', self.pp,
            '--log-interval', 1,
            '--log-throughput',
            '--eval-iters', 0,
        ]
        if self.data.get('data_path'):
            args += ['--data-path', self.data['data_path'],
                     '--split', '949,50,1',
                     '--tokenizer-type', 'GPT2BPETokenizer',
                     '--vocab-file', self.data.get('vocab_file', ''),
                     '--merge-file', self.data.get('merge_file', '')]
        else:
            args += ['--mock-data', '--tokenizer-type', 'NullTokenizer',
                     '--vocab-size', GPT2_VOCAB]
        if self.precision in ('bf16', 'fp16'):
            args.append(f'--{self.precision}')
        return [str(a) for a in args]

    def flops_per_token(self):
        m = self.model
        return flops.megatron_gpt_flops_per_token(
            m['num_layers'], m['hidden_size'], m['seq_length'], self.vocab)

    def model_flops_per_sample(self):
        '''Per token: the throughput metric counts tokens.'''
        return self.flops_per_token()

    def extract_metrics(self, text):
        return parser.extract_metrics(
            text, seq_length=self.model['seq_length'],
            flops_per_token=self.flops_per_token(),
            world_size=self.layout.world_size)

    def log_problems(self, text):
        metrics = self.metrics()
        if not metrics['iterations']:
            return ['no Megatron iteration line in the log']
        problems = []
        if metrics['iteration_last'] != self.train_iters:
            problems.append(f'training stopped at iteration '
                            f'{metrics["iteration_last"]} of '
                            f'{self.train_iters}')
        if not metrics['loss_all_finite']:
            problems.append('lm loss is not finite')
        started = parser.world_size(text)
        if started != self.layout.world_size:
            problems.append(f'Megatron started with world size {started}, '
                            f'the job has {self.layout.world_size} ranks')
        return problems

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
        Megatron-LM's analytic FLOPs per token / GPUs.

        Convention: the formula of Megatron-LM before it halved the
        attention-score term for causal masking (Narayanan et al. 2021, as
        in CARAML's pinned Megatron-LM and its FLOPs patch), i.e. 12 L h^2
        (2 + s/h + ffn/h + V/(2 L h)) per token, the full s x s attention
        counted, no recomputation. Current upstream Megatron-LM
        (``num_floating_point_operations``) counts the attention scores
        once for the causal half: at CARAML's 800M shape its figure is
        6.4% lower than this one. Compare TFLOP/s between tools only with
        the same convention; MFU here uses this one.'''
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
