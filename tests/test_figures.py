"""The performance functions the checks share
(hpctestlib_ml.plugins.figures): each reports the log's figure of its
name in its unit, and a check that assigns them reports its perflog
columns in the order its class body declares them, as it did when each
check defined its own."""
import pytest

from hpctestlib_ml.plugins import figures
from hpctestlib_ml.workloads.cosmoflow import CosmoFlowTraining
from hpctestlib_ml.workloads.gpt2_finetune import GPT2FineTuneTraining


class Logged:
    '''A check's log as the performance functions read it.'''

    def metric(self, name):
        return {'samples_per_second': 12.5}[name]


def test_a_figure_reports_the_logs_figure_in_its_unit():
    expression = figures.samples_per_second(Logged())
    assert expression.evaluate() == 12.5
    assert expression.unit == 'samples/s'
    assert figures.samples_per_second._rfm_perf_key == 'samples_per_second'


def test_a_figure_of_a_workloads_own():
    made = figures.figure('tokens_per_second', 'tokens/s', 'Tokens/s.')
    assert (made.__name__, made.__doc__) == ('tokens_per_second',
                                             'Tokens/s.')
    assert made._rfm_perf_key == 'tokens_per_second'


@pytest.mark.parametrize('cls, columns', [
    (CosmoFlowTraining, ['eval_mae', 'samples_per_second',
                         'samples_per_second_per_gpu', 'time_per_step_secs',
                         'run_time_secs']),
    (GPT2FineTuneTraining, ['samples_per_second',
                            'samples_per_second_per_gpu',
                            'train_samples_per_second', 'train_runtime',
                            'eval_loss', 'perplexity']),
], ids=lambda c: getattr(c, '__name__', ''))
def test_the_checks_columns_keep_their_order(cls, columns):
    assert list(cls._rfm_perf_fns) == columns
    assert [f._rfm_perf_key for f in cls._rfm_perf_fns.values()] == columns
