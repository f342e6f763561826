"""The throughput of timed steps (hpctestlib_ml.parsers.throughput): the
steps' counts over their seconds, per rank, and their mean time; None
where a figure is unknown."""
import pytest

from hpctestlib_ml.parsers import throughput


def test_the_rate_is_time_weighted():
    '''16 samples in 4 s: 4/s, not the mean of the steps' rates (5.33),
    which weighs the slow step as much as the fast one.'''
    assert throughput.figures([(1.0, 8), (3.0, 8)], 2) == {
        'samples_per_second': 4.0, 'samples_per_second_per_gpu': 2.0,
        'time_per_step_secs': 2.0}


def test_the_figures_are_named_after_what_the_steps_count():
    assert list(throughput.figures([(1.0, 8)], 1, count='tokens')) == [
        'tokens_per_second', 'tokens_per_second_per_gpu',
        'time_per_step_secs']


def test_steps_without_time_have_no_rate():
    assert throughput.figures([(0.0, 8)], 1) == {
        'samples_per_second': None, 'samples_per_second_per_gpu': None,
        'time_per_step_secs': 0.0}
    assert set(throughput.figures([], 1).values()) == {None}


@pytest.mark.parametrize('rate, world, expected', [
    (8.0, 4, 2.0), (8.0, None, None), (None, 4, None), (8.0, 0, None)])
def test_per_rank(rate, world, expected):
    assert throughput.per_rank(rate, world) == expected
