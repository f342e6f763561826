"""HF Trainer output (GPT-2 fine-tuning): tables, runtimes, step lines."""
import pytest

from conftest import extract, read_data
from hpctestlib_ml.registry.gpt2_finetune import causal_lm_training_flops
from hpctestlib_ml.parsers import hf_trainer as parser


@pytest.mark.parametrize('text, seconds', [
    ('0:00:00.64', 0.64), ('0:01:23.45', 83.45), ('1:42:12.36', 6132.36),
    ('1 day, 2:03:04.5', 93784.5), ('2 days, 0:00:00', 172800.0),
])
def test_runtime_hours_count_3600_seconds(text, seconds):
    assert parser.parse_value(text) == pytest.approx(seconds)


def test_runtime_over_an_hour_agrees_with_trainers_own_dict():
    # transformers 4.x: the dict says 6132.3668 s, the table 1:42:12.36.
    text = read_data('hf_trainer', 'transformers4_train_metrics_over_an_hour.txt')
    train = parser.metric_tables(text)['train']
    # The table truncates to centiseconds.
    assert train['train_runtime'] == pytest.approx(6132.3668, abs=0.01)
    assert train['train_samples_per_second'] == 2.609


def test_indented_tables_and_bare_number_dicts_of_transformers_4():
    text = read_data('hf_trainer', 'transformers4_indented_train_eval.txt')
    m = parser.extract_metrics(text)
    assert m['train_runtime'] == pytest.approx(27.21)
    assert m['train_samples_per_second'] == 70.544
    assert m['eval_loss'] == 1.6779
    assert m['loss_last'] == 2.8064
    # No suite step lines: no steady-state figure is made up.
    assert m['samples_per_second'] is None


def suite_run():
    return (read_data('hf_trainer', 'gpt2_tiny_cpu_2ranks_torchrun.out') +
            '\n' + read_data('hf_trainer', 'gpt2_tiny_cpu_2ranks_torchrun.err'))


def test_suites_own_run_with_two_ranks():
    m = extract('gpt2_finetune', suite_run())
    assert m['world_size'] == 2
    assert m['steps'] == m['max_steps'] == 40
    steps = parser.step_times(suite_run())
    # 32 samples per step: 16 per device x 2 ranks.
    assert {s[3] for s in steps} == {32}
    steady = steps[1:]
    assert m['samples_per_second'] == pytest.approx(
        32 * len(steady) / sum(s[2] for s in steady))
    assert m['samples_per_second_per_gpu'] == pytest.approx(
        m['samples_per_second'] / 2)
    assert m['perplexity'] == pytest.approx(2.718281828 ** m['eval_loss'],
                                            rel=1e-3)
    assert m['loss_last'] < m['loss_first']
    # Logged losses are per-sample means, not multiplied by the world size.
    assert 5 < m['loss_first'] < 8


def test_gpt2_training_flops():
    # gpt2 (124M): 12 layers, width 768, context 1024, vocabulary 50257.
    layers, width, block, vocab = 12, 768, 1024, 50257
    per_sequence = causal_lm_training_flops(block, width, layers, vocab)
    # ~6 N per token (N = 124M with the LM head) plus attention.
    assert per_sequence / block == pytest.approx(6 * 124e6, rel=0.2)
