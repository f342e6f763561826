"""Megatron: the iteration-line parser on real logs, FLOPs, layouts."""
import math

import pytest

from conftest import read_data
from hpctestlib_ml import flops, megatron
from hpctestlib_ml.parsers import EXTRACTORS
from hpctestlib_ml.parsers import megatron as parser


def jubench():
    # The verification lines of jubench's Megatron-LM README (175B on
    # JUWELS Booster): seconds, "[defaultN]:" prefixes, CARAML-style TFLOPs.
    return read_data('megatron', 'jubench_readme_verification.log')


def suite_run():
    # src/gpt_pretrain (Megatron-Core) under torchrun with 2 ranks, this CPU.
    return (read_data('megatron', 'mcore_cpu_2ranks_torchrun.out') + '\n' +
            read_data('megatron', 'mcore_cpu_2ranks_torchrun.err'))


def test_seconds_form_with_torchrun_prefix():
    steps = parser.parse_iterations(jubench())
    assert [s['iteration'] for s in steps] == [10, 20, 30, 40, 50]
    assert steps[0]['time_s'] == 7.2310
    assert steps[1]['printed_tflops'] == 137.10
    assert steps[0]['global_batch'] == 96
    assert steps[-1]['loss'] == pytest.approx(8.110270)


def test_jubench_tokens_per_second_matches_its_published_figure():
    m = parser.extract_metrics(jubench(), seq_length=2048)
    # First interval skipped: mean of the 4 others.
    assert m['time_per_iteration_secs'] == pytest.approx(
        (5.3551 + 5.6192 + 5.3291 + 5.3247) / 4)
    # jubench reports 36,055 tokens/s for this configuration.
    assert m['tokens_per_second'] == pytest.approx(36055, rel=0.01)
    assert m['printed_tflops_per_gpu'] == pytest.approx(135.855)


def test_suite_computes_tflops_from_megatrons_formula_not_the_printed_one():
    model = megatron.MODELS['175B']
    per_token = flops.megatron_gpt_flops_per_token(
        model['num_layers'], model['hidden_size'], 2048, 50304)
    m = parser.extract_metrics(jubench(), seq_length=2048,
                               flops_per_token=per_token, world_size=384)
    # CARAML/BigScience print with a 4x recompute factor: a third more
    # than the 3x model FLOPs the suite reports.
    assert m['printed_tflops_per_gpu'] / m['tflops_per_gpu'] == \
        pytest.approx(4 / 3, rel=0.02)


def test_milliseconds_form_of_the_suites_own_run():
    text = suite_run()
    steps = parser.parse_iterations(text)
    assert [s['iteration'] for s in steps] == list(range(1, 9))
    assert all(s['time_s'] < 5 for s in steps)
    assert parser.world_size(text) == 2
    assert parser.model_shape(text) == (2, 256, 128, 50304, 1024, 2)
    m = EXTRACTORS['megatron'](text)
    assert m['iterations'] == 8 and m['iteration_last'] == 8
    assert m['tokens_per_second'] == pytest.approx(
        8 * 128 / m['time_per_iteration_secs'])
    assert m['tflops_per_gpu'] == pytest.approx(
        m['tokens_per_second'] * flops.megatron_gpt_flops_per_token(
            2, 256, 128, 50304) / 2 / 1e12)
    assert m['loss_all_finite']
    # Random tokens: the loss stays near ln(vocabulary).
    assert abs(m['loss_last'] - math.log(50304)) < 0.5


def test_flops_formula_equals_narayanan_for_4h_ffn():
    L, h, s, V = 96, 12288, 2048, 50304
    narayanan = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    assert flops.megatron_gpt_flops_per_token(L, h, s, V) == \
        pytest.approx(narayanan)


def test_padded_vocab_and_data_parallel_size():
    assert megatron.padded_vocab(50257, 1) == 50304
    assert megatron.padded_vocab(50257, 8) == 51200
    assert megatron.data_parallel_size(384, 8, 8) == 6
    with pytest.raises(ValueError, match='use a multiple of 64 GPUs'):
        megatron.data_parallel_size(40, 8, 8)


def test_no_iterations_no_numbers():
    m = parser.extract_metrics('Traceback (most recent call last):\n')
    assert m['iterations'] == 0 and m['tokens_per_second'] is None


def megatron_core_losses(tmp_path, procs, pp=1, tp=1, port=29610,
                         extra=()):
    '''The fallback (Megatron-Core alone) for 6 iterations of a tiny GPT
    under torchrun with gloo; its logged losses.'''
    import os
    import subprocess
    import sys
    from conftest import REPO
    proc = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc-per-node',
         str(procs), '--master-port', str(port), '-m', 'gpt_pretrain',
         '--num-layers', '2', '--hidden-size', '256', '--num-attention-heads',
         '4', '--seq-length', '128', '--max-position-embeddings', '128',
         '--micro-batch-size', '2', '--global-batch-size', '8',
         '--train-iters', '6', '--lr', '1e-3', '--mock-data',
         # A vocabulary that pads alike at TP 1 and 2 (4096), no dropout:
         # the same tokens and arithmetic in every layout.
         '--vocab-size', '4096', '--hidden-dropout', '0',
         '--attention-dropout', '0', '--position-embedding-type', 'rope',
         '--pipeline-model-parallel-size', str(pp),
         '--tensor-model-parallel-size', str(tp), *extra],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
             'OMP_NUM_THREADS': '1'},
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout + proc.stderr
    assert f'pipeline-model-parallel size: {pp}' in text
    return [s['loss'] for s in parser.parse_iterations(text)]


@pytest.mark.integration
def test_pipeline_and_tensor_parallel_follow_one_rank(tmp_path):
    '''PP=2 and TP=2 with Megatron-Core alone (no Megatron-LM), on this
    CPU with gloo: the same loss curve as one rank from the same seed
    (the weights do not depend on the layout).'''
    one = megatron_core_losses(tmp_path, 1, port=29611)
    pipeline = megatron_core_losses(tmp_path, 2, pp=2, port=29612)
    tensor = megatron_core_losses(tmp_path, 2, tp=2, port=29613)
    assert len(one) == 6 and all(math.isfinite(x) for x in one)
    assert pipeline == pytest.approx(one, rel=1e-5)
    assert tensor == pytest.approx(one, rel=1e-5)
    # Random weights on random tokens: the first loss is ln(vocabulary).
    assert one[0] == pytest.approx(math.log(4096), rel=0.02)
