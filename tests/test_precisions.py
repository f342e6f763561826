"""The MLPerf-style workloads' precisions: the benchmark size trains what
the closed-division submissions train, the reference program's precision
is one ``-S precision=`` away, and the perflog carries both."""
import pytest

from hpctestlib_ml import registry
from hpctestlib_ml.perflog_fields import names as perflog_names

from test_reframe_dryrun import juwels_scripts, run_line

#: What the closed submissions train (mlcommons/hpc_results_v3.0 logs and
#: configs; training_results for BERT) and what the references train.
EXPECTED = {
    'deeplabv3plus': ('fp16', 'fp32'),
    'cosmoflow': ('fp16', 'fp32'),
    'bert': ('fp16', 'fp32'),
    'alphafold2': ('bf16', 'fp32'),
}


@pytest.mark.parametrize('workload', sorted(EXPECTED))
def test_benchmark_size_trains_the_submissions_precision(workload):
    declared = registry.get(workload)
    benchmark, reference = EXPECTED[workload]
    assert declared.sizes['benchmark']['precision'] == benchmark
    assert declared.reference_precision == reference
    # The choice names the files it was read from.
    assert 'mlcommons/' in declared.precision_choice.basis


def test_the_mlperf_workloads_record_their_choice():
    '''Every workload whose program logs MLPerf events records what its
    benchmark size trains in and why (its declaration's precision_choice),
    and its benchmark size trains in it.'''
    from hpctestlib_ml.parsers import mllog
    mlperf = [declared for declared in registry.registered().values()
              if declared.parser is mllog]
    assert {d.name for d in mlperf} >= set(EXPECTED)
    for declared in mlperf:
        choice = declared.precision_choice
        assert choice.basis, declared.name
        assert declared.sizes['benchmark']['precision'] == choice.benchmark


def test_reference_precision_is_logged_with_every_result():
    logged = perflog_names()
    assert 'reference_precision' in logged
    assert logged.index('precision') < logged.index('reference_precision')


def test_workloads_without_a_recorded_reference_log_nothing():
    assert registry.get('resnet50').reference_precision == ''


def test_reference_precision_is_one_option_away(tmp_path, cache_dir):
    '''-S precision=fp32 gives the reference programs' precision at
    benchmark size on a GPU partition.'''
    scripts = juwels_scripts(
        tmp_path / 'var', cache_dir,
        '^(BERTLarge|CosmoFlow|DeepLabV3Plus|AlphaFold2)%scale=1_node%'
        'launch_mode=per_task', '-S', 'precision=fp32')
    assert len(scripts) == 4
    for text in scripts.values():
        assert '--precision fp32 ' in run_line(text)
