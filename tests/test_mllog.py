""":::MLLOG parsing (shared by BERT, later CosmoFlow/DeepCAM/OpenFold) on
published logs and the suite's own BERT run."""
import pytest

from conftest import extract, read_data
from hpctestlib_ml import flops
from hpctestlib_ml.registry import bert
from hpctestlib_ml.parsers import mllog


def test_run_time_is_run_stop_minus_run_start():
    # AMD's MI300X BERT-L blog: run_start 1744838717800, run_stop
    # 1744839180560, "equal to 7.713 min".
    m = mllog.extract_metrics(read_data('mllog',
                                        'amd_rocm_blog_bert_mi300x_excerpt.log'))
    assert m['run_time_secs'] == pytest.approx(462.76)
    assert m['run_time_secs'] / 60 == pytest.approx(7.713, abs=0.001)
    assert m['status'] == 'success'
    assert m['eval_accuracy'] == pytest.approx(0.7209873199462891)
    # Its one tracked_stats comes after run_stop: the submitter's average
    # over the whole run, not a steady-state training record.
    assert m['samples_per_second'] is None
    assert m['throughput_records'] == 0
    assert mllog.values(mllog.parse_events(read_data(
        'mllog', 'amd_rocm_blog_bert_mi300x_excerpt.log')),
        'eval_accuracy')[-1] == pytest.approx(0.72099, abs=1e-5)


def test_rank_prefixed_lines():
    events = mllog.parse_events(read_data('mllog',
                                          'nvidia_bert_readme_rank_prefixed.log'))
    assert [e['key'] for e in events] == ['tracked_stats', 'eval_start']
    assert mllog.tracked_stats(events)[0][1]['throughput'] == \
        pytest.approx(14214.66, abs=0.01)


def suite_run():
    return (read_data('mllog', 'bert_tiny_cpu_2ranks_torchrun.out') + '\n' +
            read_data('mllog', 'bert_tiny_cpu_2ranks_torchrun.err'))


def test_suites_bert_run_with_two_ranks():
    text = suite_run()
    m = extract('bert', text)
    assert m['benchmark'] == 'bert'
    assert m['world_size'] == 2 and m['global_batch_size'] == 64
    assert m['steps'] == 10 and m['status'] == 'success'
    stats = mllog.tracked_stats(mllog.parse_events(text))
    assert [step for step, _ in stats] == list(range(1, 11))
    steady = [s['step_time'] for _, s in stats[1:]]
    # Time-weighted over the steps after the first.
    assert m['samples_per_second'] == pytest.approx(64 * 9 / sum(steady))
    assert 0 < m['run_time_secs'] < 60
    assert m['losses_finite']


def test_malformed_lines_are_skipped():
    text = (':::MLLOG {"key": "run_start", "time_ms": 1}\n'
            ':::MLLOG {not json}\n'
            'noise :::MLLOG {"key": "run_stop", "time_ms": 2501, '
            '"metadata": {"status": "aborted"}}\n')
    m = mllog.extract_metrics(text)
    assert m['events'] == 2
    assert m['run_time_secs'] == 2.5 and m['status'] == 'aborted'


def test_bert_large_is_about_one_teraflop_per_sequence():
    # The masked-LM head at the 76 masked positions, as MLPerf's reference.
    per_sequence = flops.training_flops(bert.forward_flops('bert-large'))
    assert per_sequence == pytest.approx(1.02e12, rel=0.01)
