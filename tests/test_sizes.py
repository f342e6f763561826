"""What a size means for a case (hpctestlib_ml.sizes), without ReFrame:
the decisions that only integration runs of reframe reached before."""
import pytest

from hpctestlib_ml import sizes
from hpctestlib_ml.errors import BadInputError, positive_int

#: A workload's sizes as the workload modules write them.
SIZES = {
    'tiny': {'model': 'tiny', 'batch_size': 4, 'steps': 20,
             'time_limit': '15m'},
    'benchmark': {'model': 'reference', 'batch_size': 4, 'steps': 100,
                  'precision': 'fp16', 'time_limit': '1h'},
}
TABLE = sizes.size_table(SIZES)


def asked(**values):
    '''What a user left unset (None) or set, as the Sizing plugin passes
    it.'''
    base = {'size': 'auto', 'time_limit': None, 'batch_size': None,
            'precision': None, 'steps': None, 'model': None}
    return {**base, **values}


def resolve(uses_gpus=False, fixed_work=None, **values):
    auto = 'benchmark' if uses_gpus else 'tiny'
    return sizes.resolve_size('cosmoflow', asked(**values), TABLE, auto,
                              uses_gpus, fixed_work, 'sys:part')


def test_short_is_the_benchmark_for_fewer_steps():
    assert TABLE['short'] == {'model': 'reference', 'batch_size': 4,
                              'steps': 100, 'precision': 'fp16',
                              'time_limit': '1h'}
    own = sizes.size_table({**SIZES, 'short': {'steps': 20,
                                               'precision': None}})
    assert own['short']['steps'] == 20 and 'precision' not in own['short']
    assert 'short' not in sizes.size_table({'tiny': SIZES['tiny']})


def test_auto_is_benchmark_on_gpu_partitions_and_tiny_elsewhere():
    assert sizes.default_size(['gpu', 'x']) == 'benchmark'
    assert sizes.default_size([]) == 'tiny'
    on_gpu = resolve(uses_gpus=True)
    assert on_gpu.size == 'benchmark'
    assert on_gpu.values['precision'] == 'fp16'
    assert on_gpu.time_limit == '1h' and on_gpu.sized_precision == 'fp16'
    on_cpu = resolve()
    assert on_cpu.size == 'tiny' and on_cpu.values['model'] == 'tiny'
    assert on_cpu.values['steps'] == 20


def test_the_users_values_win_and_cpus_train_fp32():
    chosen = resolve(uses_gpus=True, batch_size='8', time_limit='5m',
                     precision='bf16')
    assert chosen.values['batch_size'] == 8
    assert chosen.time_limit is None           # the user's stays
    assert chosen.values['precision'] == 'bf16'
    assert chosen.sized_precision is None      # asked for: not replaced
    # Sizes' mixed precisions are for GPUs.
    assert resolve(size='benchmark', steps=3).values['precision'] == 'fp32'
    assert resolve(size='benchmark', steps=3, precision='bf16').values[
        'precision'] == 'bf16'


def test_bad_input_names_the_fix():
    with pytest.raises(BadInputError, match="unknown size 'huge' for "
                       "cosmoflow: use -S size= one of auto, tiny, short, "
                       "benchmark"):
        resolve(size='huge')
    with pytest.raises(BadInputError, match='steps must be an integer >= 2'):
        resolve(steps=1)
    with pytest.raises(BadInputError, match='fix -S batch_size'):
        resolve(batch_size='four')
    with pytest.raises(BadInputError, match=r'-S steps=5 at size benchmark: '
                       r'3.2M samples, so other steps would not be the '
                       r'benchmark; .* use --mode short'):
        resolve(uses_gpus=True, steps=5, fixed_work='3.2M samples')


def test_fixed_work_allows_steps_at_short_size():
    assert resolve(uses_gpus=True, size='short', steps=5,
                   fixed_work='3.2M samples').values['steps'] == 5


def test_short_on_a_cpu_is_skipped_unless_steps_are_asked_for():
    skipped = resolve(size='short')
    assert skipped.skip.startswith('size short runs the benchmark model of '
                                   'cosmoflow at its per-GPU batch (4) for '
                                   '100 steps')
    assert 'to run it on sys:part anyway' in skipped.skip
    assert resolve(size='short', steps=3).skip is None


@pytest.mark.parametrize('fixed_work, how', [
    (None, 'ask for the steps (-S steps=N)'),
    ('3.2M samples', 'run its model for N steps with --mode short -S '
                     'steps=N (3.2M samples)'),
])
def test_benchmark_on_a_cpu_is_skipped_as_short_is(fixed_work, how):
    '''Row 12 of the bad-input review: --mode benchmark on a CPU partition
    started the reference model for 100 steps with no word, while the
    smaller short size was skipped with the reason.'''
    skipped = resolve(size='benchmark', fixed_work=fixed_work)
    assert skipped.skip.startswith('size benchmark runs the benchmark of '
                                   'cosmoflow at its per-GPU batch (4) for '
                                   '100 steps: it is meant for GPU '
                                   'partitions; to run it on sys:part '
                                   'anyway, ' + how), skipped.skip
    assert resolve(size='benchmark', uses_gpus=True,
                   fixed_work=fixed_work).skip is None


def test_steps_default_to_eight_and_need_two():
    table = sizes.size_table({'tiny': {'batch_size': 2}})
    chosen = sizes.resolve_size('x', asked(), table, 'tiny', False)
    assert chosen.values['steps'] == sizes.DEFAULT_STEPS == 8
    assert positive_int('n', ' 3 ') == 3
    with pytest.raises(BadInputError):
        positive_int('n', '3.0')
