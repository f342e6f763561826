import json
import pathlib

import pytest

from hpctestlib_ml import flops
from hpctestlib_ml.registry.clip import (OPENCLIP_FORWARD_GFLOPS,
                                         config_forward_flops, forward_flops,
                                         model_config)


@pytest.mark.parametrize('model', sorted(OPENCLIP_FORWARD_GFLOPS))
def test_analytic_clip_flops_match_openclip_profile(model):
    '''The table holds OpenCLIP's docs/model_profile.csv figures; the
    analytic count from each model's config reproduces them.'''
    assert config_forward_flops(model_config(model)) / 1e9 == \
        pytest.approx(OPENCLIP_FORWARD_GFLOPS[model], rel=1e-3)


def test_vit_l_14_training_flops():
    assert forward_flops('ViT-L-14') == 175.33e9
    assert flops.training_flops(forward_flops('ViT-L-14')) == \
        pytest.approx(526e9, rel=1e-3)


def test_unknown_model_says_where_configs_come_from():
    with pytest.raises(LookupError, match="no OpenCLIP model config 'nope'"):
        forward_flops('nope')


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
