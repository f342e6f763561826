"""CosmoFlow: the port against the reference's numbers, and its log."""
import sys

import pytest

from conftest import REPO, read_data
from hpctestlib_ml import cosmoflow, flops
from hpctestlib_ml.parsers import EXTRACTORS, mllog

sys.path.insert(0, str(REPO / 'src'))
from cosmoflow.model import build_model  # noqa: E402


def test_reference_model_has_the_reference_size():
    # MLPerf HPC v1.0 config: 4 x 128^3 input, conv_size 32, kernel 3.
    model = build_model(128)
    assert sum(p.numel() for p in model.parameters()) == \
        pytest.approx(8.9e6, rel=0.01)


def test_reference_flops_per_trained_sample():
    cube, conv_size = cosmoflow.SIZES['reference']
    per_sample = flops.training_flops(
        flops.cosmoflow_forward_flops(cube, conv_size))
    assert per_sample == pytest.approx(207e9, rel=0.01)


def test_tiny_model_runs_forward():
    import torch
    model = build_model(32, conv_size=8)
    assert model(torch.zeros(2, 4, 32, 32, 32)).shape == (2, 4)
    with pytest.raises(ValueError, match='too small'):
        build_model(16)


def test_suites_cosmoflow_run_with_two_ranks():
    text = read_data('mllog', 'cosmoflow_tiny_cpu_2ranks_torchrun.out')
    m = EXTRACTORS['cosmoflow'](text)
    assert m['benchmark'] == 'cosmoflow'
    assert m['world_size'] == 2 and m['global_batch_size'] == 8
    assert m['steps'] == 20 and m['status'] == 'success'
    eval_error = mllog.last_value(mllog.parse_events(text), 'eval_error')
    assert 0 < eval_error < 2
    assert m['eval_error'] == eval_error
