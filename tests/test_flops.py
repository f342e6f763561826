import json
import pathlib

import pytest

from hpctestlib_ml import flops
from hpctestlib_ml.clip import model_config


@pytest.mark.parametrize('model, gflops', [
    # OpenCLIP docs/model_profile.csv (forward GFLOPs per image-text pair)
    ('ViT-B-32', 14.78), ('ViT-B-16', 41.09), ('ViT-L-14', 175.33),
    ('ViT-H-14', 381.68),
])
def test_clip_forward_flops_match_openclip_profile(model, gflops):
    assert flops.clip_forward_flops(model_config(model)) / 1e9 == \
        pytest.approx(gflops, rel=1e-3)


def test_training_factors():
    assert flops.training_flops(10) == 30
    assert flops.training_flops(10, recompute=True) == 40


def test_tiny_config_is_shipped_with_the_program():
    cfg = model_config('CLIP-tiny')
    path = pathlib.Path('src/clip_train/model_configs/CLIP-tiny.json')
    assert cfg == json.loads((pathlib.Path(__file__).parent.parent /
                              path).read_text())
    # The default tokenizer's vocabulary: text ids must fit the embedding.
    assert cfg['text_cfg']['vocab_size'] == 49408
