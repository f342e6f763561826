"""GPT-2 fine-tuning on WikiText-2 with Hugging Face Trainer: the check.
The workload (sizes, FLOPs, what ``hpcml prepare`` fetches, model
builder): :mod:`hpctestlib_ml.registry.gpt2_finetune`."""
from reframe.core.builtins import parameter, performance_function, variable

from hpctestlib_ml import image, paths
from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.constants import GPU_FEATURE
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.plugins import figures
from hpctestlib_ml.registry import gpt2_finetune
from hpctestlib_ml.registry.gpt2_finetune import prepare

#: Training precisions, a parameter of the check.
PRECISIONS = gpt2_finetune.WORKLOAD.precisions


def log_problems(log, world_size):
    '''One-line reasons why a Trainer log (a
    :class:`~hpctestlib_ml.metrics.TrainingLog` of
    :func:`~hpctestlib_ml.parsers.hf_trainer.training_log`) shows a bad run on
    *world_size* ranks; [] if none.

    The steps expected are those the run planned (its step lines'
    ``max_steps``): at benchmark size the epochs, not ``-S steps``, decide
    them. Beyond the common checks: evaluation ran, and a finite loss
    fell from the first logged to the last (fine-tuning that does not
    lower it learned nothing).'''
    problems = common_problems(log, log.figures['max_steps'], world_size)
    if log.figures['perplexity'] is None:
        problems.append('no eval metrics table: evaluation did not run')
    if (log.losses_finite and log.loss_first is not None and
            not log.loss_last < log.loss_first):
        problems.append(f'training loss did not decrease '
                        f'({log.loss_first} -> {log.loss_last})')
    return problems


class GPT2FineTuneTraining(MLTrainingTest):
    '''Causal-LM fine-tuning with HF Trainer.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - ``train_precision`` (fp32, fp16, bf16)
       * - Variables
         - ``model``, ``prepared_dir``, ``epochs``
       * - Metrics
         - ``samples_per_second`` (samples/s),
           ``samples_per_second_per_gpu`` (samples/s),
           ``train_samples_per_second`` (samples/s), ``train_runtime`` (s),
           ``eval_loss``, ``perplexity``
       * - Partition extras
         - ``prepared_dir``
    '''

    workload = 'gpt2_finetune'

    #: Training precision: fp32, fp16 or bf16 (mixed, Trainer's --fp16 and
    #: --bf16); only fp32 on partitions without the ``gpu`` feature.
    train_precision = parameter(list(PRECISIONS))
    precision_parameter = 'train_precision'

    #: ``tiny`` or a Hugging Face model name in the cache (``gpt2``).
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    model = variable(str, type(None), value=None)

    #: Where ``hpcml prepare`` put the model and dataset; default: the
    #: partition's ``extras['prepared_dir']``, else ``$HPCML_PREPARED_DIR``,
    #: else ``<HPCML_VAR_DIR>/prepared``; in a container, the image's copy
    #: of that directory (``/opt/hpcml/prepared``, made by ``make image``)
    #: unless the partition names one.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (see above)
    prepared_dir = variable(str, type(None), value=None)

    #: Epochs at benchmark size (run_clm's default: 3).
    #:
    #: :type: :class:`float`
    #: :default: ``3.0``
    epochs = variable(str, float, value=3.0)

    def fixed_work(self):
        return (f'the benchmark fine-tunes {self.epochs:g} epochs of '
                f'WikiText-2 (run_clm\'s default; -S epochs= changes them)')

    def runs_on(self, part):
        return self.train_precision == 'fp32' or GPU_FEATURE in part.features

    def finalize_settings(self):
        self.precision = self.train_precision
        self.env_vars['HF_HUB_OFFLINE'] = '1'
        self.env_vars['HF_DATASETS_OFFLINE'] = '1'
        if self.model == 'tiny':
            return
        named = (self.prepared_dir or
                 self.current_partition.extras.get('prepared_dir'))
        if self.runs_in_container and not named:
            # The image's copy, made by make image from PREPARED_DIR.
            missing = prepare.gpt2_missing(paths.PREPARED_DIR, self.model)
            if missing:
                raise BadInputError(f'{missing}, then make image, which '
                                    f'copies it into the image')
            self.prepared_dir = image.IMAGE_PREPARED_DIR
            return
        self.prepared_dir = str(named or paths.PREPARED_DIR)
        missing = prepare.gpt2_missing(self.prepared_dir, self.model)
        if missing:
            raise BadInputError(missing)

    def container_directories(self):
        '''The prepared directory a site names (the image has its own).'''
        if self.prepared_dir and self.prepared_dir != image.IMAGE_PREPARED_DIR:
            return [self.prepared_dir]
        return []

    def program_args(self):
        args = ['--do-train', '--do-eval',
                '--per-device-train-batch-size', self.batch_size,
                '--per-device-eval-batch-size', self.batch_size,
                '--precision', self.precision,
                '--output-dir', 'output',
                '--workers', self.loader_workers()]
        if self.model == 'tiny':
            args += ['--tiny', '--max-steps', self.steps]
        else:
            model_dir, data_dir = prepare.gpt2_paths(self.prepared_dir,
                                                     self.model)
            args += ['--model', model_dir, '--dataset-dir', data_dir]
            args += (['--num-train-epochs', self.epochs]
                     if self.resolved_size == 'benchmark' else
                     ['--max-steps', self.steps])
        return [str(a) for a in args]

    def model_flops_per_sample(self):
        '''Training FLOPs per block, of the model the program reports it
        built (vocabulary, layers, width, block size: its ``[hpcml] model``
        line), so that a tokenizer or config that differs from the
        expected one cannot skew MFU.'''
        shape = self.metric('model_shape')
        vocab, layers, width, block = shape
        return gpt2_finetune.causal_lm_training_flops(block, width, layers,
                                                      vocab)

    def check_flops_known(self):
        '''The FLOPs come from the log: known once the program ran.'''

    def log_problems(self, text):
        return log_problems(self.metrics(), self.layout.world_size)

    samples_per_second = figures.samples_per_second
    samples_per_second_per_gpu = figures.samples_per_second_per_gpu

    @performance_function('samples/s')
    def train_samples_per_second(self):
        '''Trainer's own figure (start-up included).'''
        return self.metric('train_samples_per_second')

    @performance_function('s')
    def train_runtime(self):
        return self.metric('train_runtime')

    @performance_function('')
    def eval_loss(self):
        return self.metric('eval_loss')

    @performance_function('')
    def perplexity(self):
        return self.metric('perplexity')
