"""The OpenCLIP parser on real logs: the suite's own runs and JUWELS Booster's."""
import math

import pytest

from hpctestlib_ml.parsers import open_clip
from conftest import read_data


def test_two_rank_log_metrics():
    text = read_data('open_clip', 'cpu_2ranks_torchrun.err')
    steps = open_clip.parse_train_lines(text)
    assert len(steps) == 8
    assert steps[0]['samples'] == 64 and steps[-1]['samples'] == 512
    assert steps[-1]['percent'] == 100

    metrics = open_clip.extract_metrics(text)
    batch_times = [s['batch_time'] for s in steps]
    assert metrics['steps'] == 8
    assert metrics['total_time_secs'] == pytest.approx(sum(batch_times[1:]))
    assert metrics['time_per_iteration_secs_avg'] == pytest.approx(
        sum(batch_times[1:]) / 7)
    assert metrics['throughput_avg'] == pytest.approx(
        sum(s['throughput'] for s in steps[1:]) / 7)
    # Two ranks: per-GPU (per-rank) throughput is half the total.
    assert metrics['throughput_per_gpu_avg'] == pytest.approx(
        metrics['throughput_avg'] / 2, rel=1e-4)
    assert metrics['done_percent_last'] == 100
    # Identical synthetic pairs: the loss is ln(global batch 2 x 32).
    assert metrics['loss_last'] == pytest.approx(math.log(64), abs=1e-4)
    assert metrics['loss_all_finite'] is True


def test_two_rank_log_shows_both_ranks_and_params():
    text = read_data('open_clip', 'cpu_2ranks_torchrun.err')
    assert open_clip.ranks_started(text) == ({0, 1}, 2)
    params = open_clip.parse_params(text)
    assert params['world_size'] == '2'
    assert params['local_loss'] == 'True'
    assert params['gather_with_grad'] == 'True'
    assert params['log_every_n_steps'] == '1'


def test_one_rank_log():
    text = read_data('open_clip', 'cpu_1rank_torchrun.err')
    metrics = open_clip.extract_metrics(text)
    assert metrics['steps'] == 8
    assert metrics['throughput_per_gpu_avg'] == pytest.approx(
        metrics['throughput_avg'], rel=1e-4)
    assert metrics['loss_last'] == pytest.approx(math.log(32), abs=1e-4)
    assert open_clip.ranks_started(text) == ({0}, 1)


def test_openclip_own_out_log_gives_same_steps():
    '''OpenCLIP's logs/<name>/out.log holds rank 0's lines, no labels.'''
    text = read_data('open_clip', 'cpu_2ranks_openclip_out.log')
    metrics = open_clip.extract_metrics(text)
    assert metrics['steps'] == 8
    assert metrics['done_percent_last'] == 100


def test_juwels_booster_excerpt_reproduces_mmoclip_definition():
    '''Lines of the 8-node JUWELS Booster run published with MMoCLIP
    (jubench-mmoclip DESCRIPTION.md): total time skips the first step,
    exactly as the benchmark's grep | tail -n +2 | awk sum does.'''
    text = read_data('open_clip', 'juwels_booster_mmoclip_excerpt.log')
    metrics = open_clip.extract_metrics(text)
    assert metrics['steps'] == 3
    assert metrics['total_time_secs'] == pytest.approx(6.655 + 6.466)
    assert metrics['throughput_avg'] == pytest.approx((2461.78 + 2533.71) / 2)
    assert metrics['throughput_per_gpu_avg'] == pytest.approx(
        (76.9308 + 79.1783) / 2)
    assert metrics['done_percent_last'] == 2


def test_prefixed_lines_and_old_format_without_per_gpu():
    text = (
        '[rank0]: 2022-01-01,00:00:00 | INFO | Train Epoch: 0 [ 64/640 (10%)]'
        ' Loss: 4.1589 (4.1589) Data (t): 0.100 Batch (t): 2.000, 32.0000/s'
        ' LR: 0.000100 Logit Scale: 14.286\n'
        'jube: Train Epoch: 0 [128/640 (20%)] Loss: 4.1589 (4.1589) Data (t):'
        ' 0.050 Batch (t): 1.000, 64.0000/s LR: 0.000200 Logit Scale: 14.286\n'
        'Running in distributed mode with multiple processes. Device: cuda:0.'
        'Process (global: 0, local 0), total 2.\n'
    )
    metrics = open_clip.extract_metrics(text)
    assert metrics['steps'] == 2
    assert metrics['total_time_secs'] == 1.0
    assert metrics['throughput_avg'] == 64.0
    # No /s/gpu field: per-GPU from the world size in the log.
    assert metrics['throughput_per_gpu_avg'] == 32.0
    assert metrics['loss_last'] == pytest.approx(4.1589)


def test_nan_loss_is_reported_not_finite():
    line = ('Train Epoch: 0 [ 32/64 (50%)] Data (t): 0.1 Batch (t): 1.0, '
            '32.0/s, 32.0/s/gpu LR: 0.1 Logit Scale: 14.3 '
            'Contrastive_loss: nan (nan) Loss: nan (nan)\n')
    metrics = open_clip.extract_metrics(line * 2)
    assert metrics['loss_all_finite'] is False


def test_single_step_has_no_steady_state():
    text = read_data('open_clip', 'juwels_booster_mmoclip_excerpt.log')
    metrics = open_clip.extract_metrics(text.splitlines()[0])
    assert metrics['steps'] == 1
    assert metrics['total_time_secs'] is None
    assert metrics['throughput_avg'] is None


def test_empty_and_refused_logs():
    assert open_clip.extract_metrics('')['steps'] == 0
    text = read_data('open_clip', 'refused_existing_name.out')
    assert open_clip.refused_to_run(text)
    assert open_clip.extract_metrics(text)['steps'] == 0


@pytest.mark.parametrize('name', ['slurm_2nodes_torchrun.err',
                                  'slurm_2procs_srun.err'])
def test_logs_from_a_real_slurm_cluster(name):
    '''2 ranks under Slurm: torchrun on two nodes (n1, n2) and srun one task
    per rank, from the suite's run on a 2-node Slurm 22.05 cluster.'''
    text = read_data('open_clip', name)
    assert open_clip.ranks_started(text) == ({0, 1}, 2)
    metrics = open_clip.extract_metrics(text)
    assert metrics['steps'] == 8
    assert metrics['done_percent_last'] == 100
    assert metrics['loss_last'] == pytest.approx(math.log(64), abs=1e-4)
    steps = open_clip.parse_train_lines(text)
    assert metrics['total_time_secs'] == pytest.approx(
        sum(s['batch_time'] for s in steps[1:]))
