"""What a training log shows, as one record whatever program wrote it, and
the checks that every workload makes on it.

The parsers used to return dicts that named one idea several ways
(``loss_all_finite`` and ``losses_finite``, ``iteration_last`` and
``steps``, ``workers`` and ``world_size``), so each workload rewrote the
same checks of steps, ranks and loss with its own wording. Here each idea
has one name (:class:`TrainingLog`) and each check one place and one
message (:func:`common_problems`); a workload adds only what is its own.

``hpcml extract`` prints a format's record under the keys that format's
JSON has always had (:meth:`TrainingLog.as_dict`), so that scripts and the
perflogs written before stay readable. Standard library only: ``hpcml
extract`` and the ReFrame checks share it.
"""
import dataclasses
import math

#: The fields every format fills, in the order :meth:`TrainingLog.as_dict`
#: writes them; ``loss_first`` and ``loss_last`` are derived from
#: ``losses`` but printed by most formats' JSON.
COMMON_NAMES = ('steps', 'world_size', 'ranks', 'loss_first', 'loss_last',
                'losses', 'losses_finite', 'timed_window')


@dataclasses.dataclass
class TrainingLog:
    '''One training log, read: the ideas every workload checks, each under
    one name, and the format's own figures.

    ``steps``: the training steps the log shows done: the last step it
    reached (Megatron's last iteration, MLPerf's largest ``step_num``,
    tf_cnn_benchmarks' last step line), or its lines of one step each
    (OpenCLIP's training lines, the suite's ``[hpcml] step`` lines beside
    Trainer); 0 or None where it shows none, as each format's JSON has
    always printed it.

    ``world_size``: the ranks the program says it ran with (OpenCLIP's
    start lines, Megatron's ``using world size``, MLPerf's
    ``number_of_ranks``, the suite's ``[hpcml] model`` line beside
    Trainer), or, for tf_cnn_benchmarks, the processes that printed the
    job's rate (each Horovod rank prints its own); None where the log does
    not say.

    ``ranks``: the global ranks the log shows started, where the format
    names each (OpenCLIP); None where it gives a count only.

    ``losses``: the logged training losses, in order; ``losses_finite``:
    False where a logged loss, or the format's own count of NaN steps
    (Megatron), shows a non-finite loss, True where every logged loss is
    finite, None where no loss is logged.

    ``timed_window``: (start, stop) Unix seconds of the steady-state steps
    (:mod:`hpctestlib_ml.parsers.timed_window`), None without timestamps.

    ``figures``: the format's other numbers and facts under the names
    ``hpcml extract`` and the performance functions use (throughput,
    times, evaluation quality, the run's status, the planned steps, ...).
    '''

    steps: int | None = None
    world_size: int | None = None
    ranks: frozenset | None = None
    losses: list = dataclasses.field(default_factory=list)
    losses_finite: bool | None = None
    timed_window: tuple | None = None
    figures: dict = dataclasses.field(default_factory=dict)

    @property
    def loss_first(self):
        return self.losses[0] if self.losses else None

    @property
    def loss_last(self):
        return self.losses[-1] if self.losses else None

    def as_dict(self, names, no_loss_is_finite=False):
        '''The record as ``hpcml extract`` prints it for one format: the
        common fields under *names* (field -> that format's JSON key; a
        field not in it is not printed), then the figures.

        *no_loss_is_finite*: print ``losses_finite`` True where no loss is
        logged, as the JSON of Trainer, tf_cnn_benchmarks and Megatron logs
        always did (they printed "no logged loss is non-finite").'''
        common = {}
        for field in COMMON_NAMES:
            if field in names:
                value = getattr(self, field)
                if field == 'losses_finite' and no_loss_is_finite:
                    value = value is not False
                common[names[field]] = value
        return {**common, **self.figures}


def losses_finite(losses):
    '''``losses_finite`` of a :class:`TrainingLog` with *losses*: None
    for none.'''
    return all(math.isfinite(v) for v in losses) if losses else None


def common_problems(log, expected_steps, world_size, loss_required=False):
    '''One-line reasons why *log* does not show a whole, sane run of the
    job; [] if none. Every workload checks these, in this order:

    - every rank started: the log's world size (and, where it names them,
      its ranks) is the job's *world_size* (None: not checked);
    - the steps: some step logged, and *expected_steps* of them (None: the
      count is the workload's to judge, as OpenCLIP's epoch);
    - the loss: no logged loss is non-finite; *loss_required*: some loss
      is logged (MLPerf programs log one each step; Trainer and Megatron
      may log none in a short run, Megatron none while its loss scaler
      skips steps).
    '''
    return (_rank_problems(log, world_size) +
            _step_problems(log, expected_steps) +
            _loss_problems(log, loss_required))


def _rank_problems(log, world_size):
    if world_size is None:
        return []
    if log.ranks is not None:
        expected = set(range(world_size))
        if log.ranks == expected and log.world_size == world_size:
            return []
        missing = sorted(expected - log.ranks)
        return [f'{len(log.ranks)} of {world_size} ranks started (missing: '
                f'{missing[:8]})']
    if log.world_size == world_size:
        return []
    if log.world_size is None:
        return [f'the log shows no world size, the job has {world_size} '
                f'ranks']
    return [f'training ran with world size {log.world_size}, the job has '
            f'{world_size} ranks']


def _step_problems(log, expected_steps):
    if not log.steps:
        return ['no training step logged']
    if expected_steps is not None and log.steps != expected_steps:
        return [f'{log.steps} of {expected_steps} steps logged']
    return []


def _loss_problems(log, loss_required):
    if log.losses_finite is False:
        return ['training loss is not finite']
    if log.losses_finite is None and loss_required:
        return ['no training loss logged']
    return []
