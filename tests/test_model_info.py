"""The models the programs build are the published benchmarks' models, and
the FLOPs that MFU uses are those models' FLOPs (hpcml model-info).

Parameter counts are checked against the published ones (or, for
Megatron's GPT, against its closed form); the analytic forward FLOPs of
every workload and size against FlopCounterMode (TensorFlow's profiler for
ResNet-50) on the model the program builds, large ones on the meta device.
"""
import json
import subprocess
import sys

import pytest

from conftest import BIN, REPO
from hpctestlib_ml import model_info, workloads

#: Workload, size -> the published parameter count, and where it is from.
PUBLISHED_PARAMS = {
    # MLPerf HPC DeepCAM reference DeepLabv3+ (mlcommons/hpc deepcam
    # architecture/deeplab_xception.py), 16 channels, 3 classes.
    ('deeplabv3plus', 'benchmark'): 56_454_720,
    # MLPerf Training BERT reference (encoder, pooler, MLM head tied to the
    # embeddings with its bias, NSP head), vocabulary 30522.
    ('bert', 'benchmark'): 336_226_108,
    # MLPerf HPC CosmoFlow reference (cosmoflow/models/cosmoflow.py).
    ('cosmoflow', 'benchmark'): 8_907_556,
    # OpenCLIP ViT-L-14.
    ('clip', 'benchmark'): 427_616_513,
    # GPT-2 small, output layer tied ("124M").
    ('gpt2_finetune', 'benchmark'): 124_439_808,
    # keras.applications.ResNet50 (v1), 1000 classes.
    ('resnet50', 'benchmark'): 25_636_712,
    # OpenFold's initial-training model (openfold/config.py, as MLPerf HPC
    # OpenFold trains it; its closed rules' model_parameters_count).
    ('alphafold2', 'benchmark'): 93_229_082,
}

#: Every size model-info and the checks know (the components have no
#: model).
SIZES = [(w, s) for w, declared in workloads.registered().items()
         if declared.model_info for s in ('tiny', 'benchmark')] + [('megatron', '13B'),
                                            ('megatron', '175B'),
                                            ('megatron', 'llama3-8B'),
                                            ('megatron', 'llama3-70B'),
                                            ('megatron', 'gptj-6B')]


@pytest.fixture(scope='module')
def infos():
    cache = {}

    def get(workload, size):
        if (workload, size) not in cache:
            cache[workload, size] = model_info.model_info(workload, size)
        return cache[workload, size]
    return get


@pytest.mark.parametrize('workload, size', SIZES)
def test_analytic_flops_are_the_built_models(infos, workload, size):
    '''MFU's FLOPs per sample agree with a count on the model the program
    builds, within 3% (exactly, for all but two: CosmoFlow's dense layers,
    left out analytically, are +0.05%; TensorFlow's profiler also counts
    batch norm and bias arithmetic, +0.5%).'''
    info = infos(workload, size)
    assert info.measured_forward_flops > 0
    assert info.flops_ratio == pytest.approx(1, abs=0.03)


@pytest.mark.parametrize('workload, size', sorted(PUBLISHED_PARAMS))
def test_benchmark_models_have_the_published_parameter_count(infos, workload,
                                                             size):
    assert infos(workload, size).params == PUBLISHED_PARAMS[workload, size]


def megatron_params(layers, hidden, vocab, seq=2048, learned_positions=False):
    '''Closed form of Megatron's GPT (biases, LayerNorm, 4h MLP, output
    layer tied): per layer QKV, projection, MLP and two norms; embeddings;
    final norm.'''
    per_layer = 12 * hidden ** 2 + 13 * hidden
    positions = seq * hidden if learned_positions else 0
    return layers * per_layer + vocab * hidden + positions + 2 * hidden


@pytest.mark.parametrize('size, layers, hidden, vocab', [
    ('800M', 16, 2048, 50304),      # TP 1
    ('13B', 40, 5120, 50432),       # TP 2
    ('175B', 96, 12288, 51200),     # TP 8
])
def test_megatron_sizes_are_caramls_models(infos, size, layers, hidden,
                                           vocab):
    # CARAML's arguments: RoPE, everything else Megatron-LM's defaults.
    assert infos('megatron', size).params == megatron_params(layers, hidden,
                                                             vocab)


def test_megatron_defaults_give_the_learned_position_model():
    '''Megatron-LM's defaults (learned absolute positions, tied output):
    912,953,344 at 800M; untied adds the 50304 x 2048 output layer.'''
    sys.path.insert(0, str(REPO / 'src'))
    from gpt_pretrain import cpu_patches, mcore_train
    from hpctestlib_ml.workloads import megatron
    cpu_patches.apply()
    base = megatron.model_arguments(
        megatron.MODELS['800M'], position_embedding_type='learned_absolute')
    counts = []
    with model_info.single_process_group():
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(1, 1)
        try:
            for extra in ([], ['--untie-embeddings-and-output-weights']):
                args = mcore_train.parse_args(
                    base + extra + ['--micro-batch-size', '1',
                                    '--global-batch-size', '1',
                                    '--train-iters', '1'])
                model = mcore_train.build_model(args, 50304, device='meta')
                counts.append(model_info.count_params(model))
        finally:
            parallel_state.destroy_model_parallel()
    assert counts[0] == 912_953_344 == megatron_params(
        16, 2048, 50304, learned_positions=True)
    assert counts[1] - counts[0] == 50304 * 2048


def test_gpt2_tiny_flops_use_the_vocabulary_the_tokenizer_learnt(infos):
    '''The tiny tokenizer stops far below the 2000 merges asked for: MFU
    must use the vocabulary of the model that was built.'''
    info = infos('gpt2_finetune', 'tiny')
    vocab = int(info.description.split('vocabulary ')[1])
    assert vocab < 1000
    from hpctestlib_ml import flops
    assert info.analytic_forward_flops == flops.causal_lm_forward_flops(
        128, 256, 2, vocab)


def test_unknown_sizes_say_what_exists():
    with pytest.raises(model_info.ModelInfoError,
                       match='use tiny, benchmark or one of'):
        model_info.model_info('megatron', '7B')
    with pytest.raises(model_info.ModelInfoError, match='no OpenCLIP model'):
        model_info.model_info('clip', 'ViT-Nope')


@pytest.mark.parametrize('workload, params', [('cosmoflow', 319_900),
                                             ('gpt2_finetune', 1_744_128)])
def test_command_prints_json_with_the_issue_keys(workload, params):
    # GPT-2's tiny model trains its tokenizer first: nothing of that may
    # reach stdout, which is the JSON object alone.
    proc = subprocess.run(
        [str(BIN / 'hpcml'), 'model-info', workload, '--size', 'tiny',
         '--json'], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert {'params', 'analytic_forward_flops',
            'measured_forward_flops'} <= set(info)
    assert info['params'] == params

