"""DeepCAM (DeepLabV3+): the reference network's structure, the
reference's loss weights and IoU, and the program's log. (Parameter count
and FLOPs: tests/test_model_info.py.)"""
import sys

import pytest
import torch

from conftest import REPO, extract, read_data
from hpctestlib_ml.parsers import mllog

sys.path.insert(0, str(REPO / 'src'))
import deepcam.__main__ as program  # noqa: E402
from deepcam import model as network  # noqa: E402


def test_reference_parts_have_the_reference_counts():
    # Per part, as the MLPerf HPC reference's layers add up: encoder
    # (aligned Xception, 16 middle blocks), ASPP (dense atrous branches),
    # decoder (transposed convolutions, one biased 1x1).
    with torch.device('meta'):
        model = network.build('reference')
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(model.encoder) == 37_778_400
    assert count(model.aspp) == 15_535_104
    assert count(model.decoder) == 3_141_216
    assert len(model.encoder.middle) == 16


@pytest.mark.parametrize('size', ['tiny', 'reference'])
def test_output_is_full_resolution_logits(size):
    with torch.device('meta'):
        model = network.build(size)
        out = model(network.example_input(size, batch=2))
    _, height, width, _ = program.SIZES[size]
    assert out.shape == (2, 3, height, width)


def test_sizes_must_divide_by_16():
    model = network.build('tiny').eval()
    with pytest.raises(ValueError, match='multiples of 16'):
        model(torch.zeros(1, 16, 120, 192))


def test_loss_weights_are_the_references():
    # freq ** -0.125 of background, cyclones, rivers in the reference set.
    weights = program.class_weights()
    assert weights.tolist() == pytest.approx([1.0017, 2.6146, 1.7164],
                                             abs=1e-4)


def test_iou_is_the_references_per_sample_mean():
    labels = torch.zeros(2, 4, 4, dtype=torch.long)
    labels[0, :2] = 1
    logits = torch.nn.functional.one_hot(labels, 3).permute(0, 3, 1,
                                                            2).float()
    assert program.iou(logits, labels) == 1
    # Sample 0 predicted all background: class 0 IoU 8/16, class 1 0,
    # class 2 absent from both (counts 1): 0.5; sample 1 perfect: 1.
    wrong = logits.clone()
    wrong[0] = 0
    wrong[0, 0] = 1
    assert program.iou(wrong, labels) == pytest.approx((0.5 + 1) / 2)


def test_warm_up_then_multistep():
    factor = program.lr_factor(400, [800], 0.1)
    assert factor(0) == 0 and factor(200) == 0.5 and factor(400) == 1
    assert factor(1200) == 1 and factor(1201) == pytest.approx(0.1)


def test_suites_deepcam_run_with_two_ranks():
    text = read_data('mllog', 'deepcam_tiny_cpu_2ranks_torchrun.out')
    m = extract('deeplabv3plus', text)
    assert m['benchmark'] == 'deepcam'
    assert m['world_size'] == 2 and m['global_batch_size'] == 4
    assert m['steps'] == 10 and m['status'] == 'success'
    events = mllog.parse_events(text)
    assert mllog.first_value(events, 'model_parameters') == 1_313_664
    assert 0 <= m['eval_accuracy'] <= 1
