"""CLIP training with OpenCLIP, and the MMoCLIP benchmark's rules: the
check. The workload (sizes, the rules, FLOPs, model builder):
:mod:`hpctestlib_ml.registry.clip`."""
import math

from reframe.core.builtins import performance_function, variable

from hpctestlib_ml import launch
from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.parsers import open_clip as parser
from hpctestlib_ml.registry import clip

#: A100 samples/s per GPU for ViT-L-14 in MMoCLIP (JUWELS Booster strong
#: scaling, jubench-mmoclip): sizes the default time limit of a benchmark run.
_VIT_L_14_SAMPLES_PER_GPU = 80.0


def log_problems(text, log, world_size, global_batch, benchmark):
    '''One-line reasons why an OpenCLIP log shows a bad run; [] if none.

    *log* is :func:`~hpctestlib_ml.parsers.open_clip.training_log` of
    *text*; *benchmark*: also require the MMoCLIP rules in OpenCLIP's
    ``Params:``. Beyond the common checks (every rank started, some step
    logged, a finite loss), OpenCLIP's own: the epoch ran to its end with
    every step logged, and the loss proves the features were gathered.
    '''
    if parser.refused_to_run(text):
        return ['OpenCLIP refused to run: the experiment name already '
                'exists under logs/']

    # The steps are OpenCLIP's epoch's, not a count the job sets.
    problems = common_problems(log, None, world_size)
    figures = log.figures
    if log.steps == 1:
        problems.append('1 training step logged, need at least 2')
    elif log.steps and figures['done_percent_last'] != 100:
        problems.append(f'training stopped at '
                        f'{figures["done_percent_last"]:g}% of the epoch')

    problems += _unlogged_steps(text, log)
    if log.losses_finite is not False and log.loss_last is not None:
        problems += _ungathered_features(log.loss_last, global_batch)

    if benchmark:
        params = parser.parse_params(text)
        broken = {k: params.get(k) for k, v in clip.MMOCLIP_RULES.items()
                  if params.get(k) != v}
        if broken:
            required = {k: clip.MMOCLIP_RULES[k] for k in broken}
            problems.append(f'MMoCLIP rules not met: {broken} (required: '
                            f'{required})')

    return problems


def _ungathered_features(loss, global_batch):
    '''Why *loss* shows that the ranks' features were not gathered; []
    where it does not.

    Every synthetic pair is the same black image and caption, so all
    logits are equal and the contrastive loss is exactly ln(logit
    columns): ln(global batch) when the features of all ranks were
    gathered, ln(local batch) when they were not.'''
    expected = math.log(global_batch)
    if abs(loss - expected) > 0.01 * expected:
        return [f'loss {loss:.4f} is not ln(global batch {global_batch}) = '
                f'{expected:.4f}: features were not gathered across all '
                f'ranks']
    return []


def _unlogged_steps(text, log):
    """Reasons why the log does not show every step, as the suite's runs
    (``--log-every-n-steps 1``) and MMoCLIP's rules (DESCRIPTION.md:
    ``--log-every-n-steps 1``, the total time summed over every step's
    ``Batch (t)``) require: a window above 1, steps missing between lines,
    or a log that does not begin with the first step; [] if none."""
    if log.steps < 2:
        return []
    window = log.figures['log_every_n_steps']
    if window != 1:
        return [f'not every step logged: log_every_n_steps is '
                f'{window if window is not None else "unknown"}, not 1']
    problems = []
    not_logged = log.figures['steps_not_logged']
    if not_logged is None:
        problems.append('the logged steps do not follow one another (a '
                        'restart, or lines out of order)')
    elif not_logged:
        problems.append(f'{not_logged} steps not logged: lines are missing '
                        f'between logged steps')
    steps = parser.parse_train_lines(text)
    logged_batch = parser.global_batch(text, steps)
    if steps[0]['samples'] != logged_batch:
        problems.append(f'the log begins at {steps[0]["samples"]} samples, '
                        f'not at the first step ({logged_batch})')
    return problems


class MMoCLIPTraining(MLTrainingTest):
    '''OpenCLIP contrastive training on synthetic image-text pairs.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``model``, ``train_num_samples``, ``grad_checkpointing``,
           ``workers``
       * - Metrics
         - ``total_time_secs`` (s), ``throughput_avg`` (samples/s),
           ``throughput_per_gpu_avg`` (samples/s),
           ``time_per_iteration_secs_avg`` (s), ``done_percent_last`` (%)
       * - Partition extras
         - none
    '''

    workload = 'clip'

    #: OpenCLIP model name; default: the size's.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    model = variable(str, type(None), value=None)

    #: Samples in the epoch; default: the benchmark's 3.2M, or
    #: ``steps`` x global batch for ``tiny``.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    train_num_samples = variable(str, int, type(None), value=None)

    #: Recompute activations in the backward pass (``--grad-checkpointing``).
    #:
    #: :type: :class:`bool` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    grad_checkpointing = variable(str, bool, type(None), value=None)

    #: Data-loader workers per rank, at most the rank's CPUs; default: the
    #: partition's ``extras['loader_workers']``, else the rank's CPUs (as
    #: MMoCLIP's JUBE script), 0 on CPU partitions
    #: (:meth:`~hpctestlib_ml.plugins.launching.Launching.loader_workers`).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the rank's CPUs on GPUs, 0 on CPUs)
    workers = variable(str, int, type(None), value=None)

    def fixed_work(self):
        return (f"MMoCLIP's rules fix {int(clip.MMOCLIP_RULES['train_num_samples']):,} "
                f"samples in {clip.MMOCLIP_RULES['epochs']} epoch")

    def global_batch(self):
        return self.batch_size * self.layout.world_size

    def finalize_settings(self):
        if self.train_num_samples is None:
            self.train_num_samples = self.steps * self.global_batch()
        self.workers = self.loader_workers(
            None if self.workers is None else int(self.workers))
        if self.resolved_size == 'benchmark' and self.time_limit is None:
            seconds = self.train_num_samples / (
                _VIT_L_14_SAMPLES_PER_GPU * self.layout.world_size)
            self.time_limit = int(1.5 * seconds + 600)

    def program_args(self):
        args = [
            '--dataset-type', 'synthetic',
            '--train-num-samples', self.train_num_samples,
            '--epochs', 1,
            f'--batch-size={self.batch_size}',
            '--model', self.model,
            '--local-loss', '--gather-with-grad',
        ]
        if self.grad_checkpointing:
            args.append('--grad-checkpointing')
        args += [
            '--log-every-n-steps', 1,
            '--workers', self.workers,
            '--device', self.device,
            '--precision', self.precision,
            '--dist-url', 'env://',
            '--save-frequency', 0,
            '--report-to', '',
            '--logs', 'logs',
        ]
        if self.resolved_size == 'tiny':
            # OpenCLIP's default warm-up is 10000 steps; fit it to the run.
            args += ['--warmup', max(1, self.steps // 4), '--lr', '1e-3']

        # A name unique per job: OpenCLIP refuses to reuse one.
        scheduler = self.current_partition.scheduler.registered_name
        name = f'--name=clip-{launch.job_id_expr(scheduler)}'
        return [str(a) for a in args] + [launch.ShellExpr(name)]

    def log_problems(self, text):
        return log_problems(text, self.metrics(), self.layout.world_size,
                            self.global_batch(),
                            self.resolved_size == 'benchmark')

    def model_flops_per_sample(self):
        return clip.training_flops(self.model)

    def recomputes_activations(self):
        return bool(self.grad_checkpointing)

    @performance_function('s')
    def total_time_secs(self):
        '''MMoCLIP's metric: sum of Batch (t) over the logged steps but the first.'''
        return self.metric('total_time_secs')

    @performance_function('samples/s')
    def throughput_avg(self):
        '''Samples/s over all ranks, steady state (first step skipped).'''
        return self.metric('throughput_avg')

    @performance_function('samples/s')
    def throughput_per_gpu_avg(self):
        '''Samples/s per rank (per GPU), steady state.'''
        return self.metric('throughput_per_gpu_avg')

    @performance_function('s')
    def time_per_iteration_secs_avg(self):
        '''Mean step time, steady state.'''
        return self.metric('time_per_iteration_secs_avg')

    @performance_function('%')
    def done_percent_last(self):
        return self.metric('done_percent_last')
