"""The MLPerf-style workloads' precisions: the benchmark size trains what
the closed-division submissions train, the reference program's precision
is one ``-S precision=`` away, and the perflog carries both."""
import pytest

from hpctestlib_ml import precisions
from hpctestlib_ml.workloads import alphafold2, bert, cosmoflow, deeplabv3plus
from hpctestlib_ml.siteconfig import PERFLOG_FIELDS

from test_reframe_dryrun import juwels_scripts, run_line

CHECKS = {
    'DeepLabV3Plus': deeplabv3plus.DeepLabV3PlusTraining,
    'CosmoFlow': cosmoflow.CosmoFlowTraining,
    'BERTLarge': bert.BERTLargeTraining,
    'AlphaFold2': alphafold2.AlphaFold2Training,
}

#: What the closed submissions train (mlcommons/hpc_results_v3.0 logs and
#: configs; training_results for BERT) and what the references train.
EXPECTED = {
    'deeplabv3plus': ('fp16', 'fp32'),
    'cosmoflow': ('fp16', 'fp32'),
    'bert': ('fp16', 'fp32'),
    'alphafold2': ('bf16', 'fp32'),
}


@pytest.mark.parametrize('check', sorted(CHECKS))
def test_benchmark_size_trains_the_submissions_precision(check):
    cls = CHECKS[check]
    benchmark, reference = EXPECTED[cls.workload]
    assert cls.sizes['benchmark']['precision'] == benchmark
    assert precisions.reference(cls.workload) == reference
    # The choice names the files it was read from.
    assert 'mlcommons/' in precisions.CHOICES[cls.workload].basis


def test_reference_precision_is_logged_with_every_result():
    assert 'reference_precision' in PERFLOG_FIELDS
    assert PERFLOG_FIELDS.index('precision') < PERFLOG_FIELDS.index(
        'reference_precision')


def test_workloads_without_a_recorded_reference_log_nothing():
    assert precisions.reference('resnet50') == ''


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
