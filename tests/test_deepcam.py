"""DeepCAM (DeepLabV3+): the FLOPs table against a measurement, the loss
weights and IoU, and the program's log."""
import sys

import pytest
import torch

from conftest import REPO, read_data
from hpctestlib_ml import flops
from hpctestlib_ml.parsers import EXTRACTORS, mllog

sys.path.insert(0, str(REPO / 'src'))
import deepcam.__main__ as program  # noqa: E402


def test_tiny_flops_table_is_what_flopcounter_measures():
    import segmentation_models_pytorch as smp
    from torch.utils.flop_counter import FlopCounterMode
    channels, height, width, encoder = program.SIZES['tiny']
    model = smp.DeepLabV3Plus(encoder_name=encoder, encoder_weights=None,
                              in_channels=channels, classes=3).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, channels, height, width))
    assert counter.get_total_flops() == pytest.approx(
        flops.DEEPCAM_FORWARD_FLOPS['tiny'], rel=0.001)


def test_rare_classes_weigh_more_and_iou_is_exact():
    labels = torch.zeros(1, 10, 10, dtype=torch.long)
    labels[0, :1, :4] = 1
    labels[0, 5:, :] = 2
    weights = program.class_weights(labels)
    assert weights[1] > weights[0] > weights[2]
    logits = torch.nn.functional.one_hot(labels, 3).permute(0, 3, 1, 2)
    assert program.mean_iou(logits.float(), labels) == 1


def test_suites_deepcam_run_with_two_ranks():
    text = read_data('mllog', 'deepcam_tiny_cpu_2ranks_torchrun.out')
    m = EXTRACTORS['deeplabv3plus'](text)
    assert m['benchmark'] == 'deepcam'
    assert m['world_size'] == 2 and m['global_batch_size'] == 4
    assert m['steps'] == 10 and m['status'] == 'success'
    events = mllog.parse_events(text)
    assert mllog.first_value(events, 'encoder') == 'mobilenet_v2'
    assert 0 <= mllog.last_value(events, 'eval_accuracy') <= 1
    assert m['eval_accuracy'] == mllog.last_value(events, 'eval_accuracy')
