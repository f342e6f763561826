"""CosmoFlow: the port against the reference's numbers, and its log."""
import sys

import pytest

from conftest import REPO, extract, read_data
from hpctestlib_ml import flops
from hpctestlib_ml.registry import cosmoflow as declared
from hpctestlib_ml.parsers import mllog

sys.path.insert(0, str(REPO / 'src'))
from cosmoflow.model import build_model  # noqa: E402


def test_reference_model_has_the_reference_size():
    # MLPerf HPC v1.0 config: 4 x 128^3 input, conv_size 32, kernel 3.
    model = build_model(128)
    assert sum(p.numel() for p in model.parameters()) == \
        pytest.approx(8.9e6, rel=0.01)


def test_reference_flops_per_trained_sample():
    cube, conv_size = declared.SIZES['reference']
    per_sample = flops.training_flops(
        declared.forward_flops(cube, conv_size))
    assert declared.training_flops('reference') == per_sample
    assert per_sample == pytest.approx(207e9, rel=0.01)


def test_tiny_model_runs_forward():
    import torch
    model = build_model(32, conv_size=8)
    assert model(torch.zeros(2, 4, 32, 32, 32)).shape == (2, 4)
    with pytest.raises(ValueError, match='too small'):
        build_model(16)


def test_suites_cosmoflow_run_with_two_ranks():
    text = read_data('mllog', 'cosmoflow_tiny_cpu_2ranks_torchrun.out')
    m = extract('cosmoflow', text)
    assert m['benchmark'] == 'cosmoflow'
    assert m['world_size'] == 2 and m['global_batch_size'] == 8
    assert m['steps'] == 20 and m['status'] == 'success'
    eval_error = mllog.last_value(mllog.parse_events(text), 'eval_error')
    assert 0 < eval_error < 2
    assert m['eval_error'] == eval_error


def reference_order(model):
    '''The same modules (and weights) as *model*, each convolution block
    in the reference's order Conv3D, LeakyReLU, MaxPool3D, without in-place
    activations.'''
    import torch
    from torch import nn
    layers = []
    for layer in model:
        if isinstance(layer, nn.LeakyReLU):
            layer = nn.LeakyReLU(layer.negative_slope)
            if isinstance(layers[-1], nn.MaxPool3d):
                layers.insert(len(layers) - 1, layer)
                continue
        layers.append(layer)
    assert [type(m) for m in layers[:3]] == [nn.Conv3d, nn.LeakyReLU,
                                             nn.MaxPool3d]
    return torch.nn.Sequential(*layers)


def outputs_and_grads(model, x):
    '''The model's output on *x* and the gradients of its summed square
    on its weights (in model.parameters() order), in eval mode (no
    dropout).'''
    model.eval()
    model.zero_grad(set_to_none=True)
    out = model(x)
    (out ** 2).sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def test_pooling_before_leaky_relu_is_the_references_function():
    # Exact: LeakyReLU is increasing, so both orders pick the same element.
    import torch
    torch.manual_seed(0)
    model = build_model(32, conv_size=8)
    x = torch.randn(2, 4, 32, 32, 32)
    out, grads = outputs_and_grads(model, x)
    ref_out, ref_grads = outputs_and_grads(reference_order(model), x)
    assert torch.equal(out, ref_out)
    for g, ref in zip(grads, ref_grads):
        assert torch.equal(g, ref)


def test_channels_last_computes_what_channels_first_does():
    import copy

    import torch
    from cosmoflow.__main__ import LAYOUTS, in_layout
    torch.manual_seed(0)
    first = build_model(32, conv_size=8)
    last = copy.deepcopy(first).to(memory_format=LAYOUTS['channels_last'])
    assert last[0].weight.is_contiguous(memory_format=torch.channels_last_3d)
    x = torch.randn(2, 4, 32, 32, 32)
    (x_last, _), = in_layout([(x, None)], 'channels_last')
    assert x_last.is_contiguous(memory_format=torch.channels_last_3d)
    out, grads = outputs_and_grads(first, x)
    out_last, grads_last = outputs_and_grads(last, x_last)
    torch.testing.assert_close(out_last, out, rtol=1e-5, atol=1e-5)
    for g, g_last in zip(grads, grads_last):
        torch.testing.assert_close(g_last, g, rtol=1e-5, atol=1e-5)


def test_default_layout_is_channels_last_with_its_reason():
    # bench/cosmoflow_step.py: channels-last is the faster on CPUs
    # (bench/results/cosmoflow_step_*.txt); on GPUs cuDNN's tensor-core
    # 3-D convolutions take NDHWC.
    import torch
    from cosmoflow.__main__ import default_layout, parse_args
    for kind in ('cpu', 'cuda'):
        layout, reason = default_layout(torch.device(kind))
        assert layout == 'channels_last' and reason
    assert parse_args([]).layout is None
    assert parse_args(['--layout', 'channels_first']).layout == \
        'channels_first'


def test_data_files_load_channels_last_without_a_copy(tmp_path):
    import numpy as np
    import torch
    from cosmoflow.__main__ import from_files, in_layout
    cube = np.arange(8 * 8 * 8 * 4, dtype=np.float32).reshape(8, 8, 8, 4)
    np.save(tmp_path / 's.npy', cube)
    np.save(tmp_path / 's.target.npy', np.zeros(4, np.float32))
    source = from_files([tmp_path / 's.npy'], 2, 8, torch.Generator())
    (x, _), = [next(in_layout(source, 'channels_last'))]
    assert x.shape == (2, 4, 8, 8, 8)
    assert x.is_contiguous(memory_format=torch.channels_last_3d)
    # Channel c of voxel (d, h, w) is the file's [d, h, w, c].
    assert x[1, 3, 2, 5, 7] == pytest.approx(np.log1p(cube[2, 5, 7, 3]))


def test_program_logs_its_layout_and_why(tmp_path):
    import os
    import subprocess

    from hpctestlib_ml import compliance
    proc = subprocess.run(
        [sys.executable, '-m', 'cosmoflow', '--steps', '2', '--batch-size',
         '1', '--eval-batches', '1'],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
             'OMP_NUM_THREADS': '2'},
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = mllog.parse_events(proc.stdout + proc.stderr)
    layout, = [e for e in events if e['key'] == 'layout']
    assert layout['value'] == 'channels_last'
    assert 'oneDNN' in layout['metadata']['reason']
    assert compliance.check(proc.stdout + proc.stderr).violations == []
