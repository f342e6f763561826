"""The step-line parser (hpctestlib_ml.parsers.step_lines): a parser
declared as the pattern of its program's step line reads the steps,
losses and world size, and its rate is time-weighted over the steps
after the first."""
import math

import pytest

from hpctestlib_ml.parsers.step_lines import StepLines

LOG = StepLines(
    world=r'^run: (\d+) ranks',
    step=r'^step (?P<step>\d+) loss (?P<loss>\S+) (?P<seconds>\S+) s '
         r'(?P<samples>\d+) samples$')

TEXT = '''run: 2 ranks
step 1 loss 2.5 9.0 s 8 samples
step 2 loss 2.0 1.0 s 8 samples
step 3 loss 1.5 3.0 s 8 samples
[hpcml] timed region 100.0 104.0
'''


def test_a_declared_log_is_read():
    log = LOG.training_log(TEXT)
    assert (log.steps, log.world_size) == (3, 2)
    assert log.losses == [2.5, 2.0, 1.5] and log.losses_finite
    assert log.timed_window == (100.0, 104.0)
    # Steps 2 and 3: 16 samples in 4 s (the mean of their rates, 5.33,
    # would weigh the slow step as much as the fast one).
    assert log.figures == {'samples_per_second': 4.0,
                           'samples_per_second_per_gpu': 2.0,
                           'time_per_step_secs': 2.0}
    assert LOG.throughput == 'samples_per_second'


def test_launchers_labels_are_taken_off_first():
    labelled = ''.join(f'0: {line}\n' for line in TEXT.splitlines())
    assert LOG.training_log(labelled) == LOG.training_log(TEXT)


def test_extract_prints_the_common_fields_then_the_figures():
    assert list(LOG.extract_metrics(TEXT)) == [
        'steps', 'world_size', 'loss_first', 'loss_last', 'losses_finite',
        'timed_window', 'samples_per_second', 'samples_per_second_per_gpu',
        'time_per_step_secs']


def test_what_the_steps_count_names_the_figures():
    tokens = StepLines(step=r'^(?P<seconds>\S+) s (?P<tokens>\d+) tok$',
                       count='tokens', warmup=0)
    log = tokens.training_log('0.5 s 100 tok\n1.5 s 300 tok\n')
    assert (log.steps, log.world_size, log.losses) == (2, None, [])
    assert log.figures == {'tokens_per_second': 200.0,
                           'tokens_per_second_per_gpu': None,
                           'time_per_step_secs': 1.0}
    assert tokens.throughput == 'tokens_per_second'


def test_a_log_without_steps_has_no_figures():
    log = LOG.training_log('run: 2 ranks\n')
    assert (log.steps, log.losses_finite) == (0, None)
    assert set(log.figures.values()) == {None}


def test_a_non_finite_loss_is_read_as_one():
    log = LOG.training_log(TEXT.replace('loss 2.0', 'loss nan'))
    assert math.isnan(log.losses[1]) and log.losses_finite is False


def test_a_pattern_without_seconds_or_count_is_refused():
    with pytest.raises(ValueError, match='no group named seconds'):
        StepLines(step=r'step (?P<samples>\d+)')
    with pytest.raises(ValueError, match='no group named tokens'):
        StepLines(step=r'(?P<seconds>\S+) s (?P<samples>\d+)',
                  count='tokens')
