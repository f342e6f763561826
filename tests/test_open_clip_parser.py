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


def _drop_train_lines(text, *samples):
    '''*text* without the training lines at those sample counts (whole
    lines deleted, as a filter or a cut log loses them).'''
    marks = [f'[{n}/' for n in samples] + [f' {n}/' for n in samples]
    return '\n'.join(ln for ln in text.splitlines()
                     if not ('Train Epoch' in ln and
                             any(m in ln for m in marks)))


TWO_RANKS_BATCH_TIMES = [4.344, 2.940, 1.689, 1.590, 1.448, 1.506, 1.336,
                         1.468]      # steps 1-8 of cpu_2ranks_torchrun.err


@pytest.mark.parametrize('keep_params', [True, False])
def test_missing_lines_are_counted_not_filled_in(keep_params):
    '''Steps 4 and 5 of an every-step log deleted: the line of step 6
    averages over step 6 alone (OpenCLIP reset its meters at the lost
    lines), so the total is what the remaining lines report and 2 steps are
    not logged. The window is the Params dump's 1, or without it the
    spacings' (1, 1, 3, 1, 1: no common divisor above 1).'''
    text = _drop_train_lines(
        read_data('open_clip', 'cpu_2ranks_torchrun.err'), 256, 320)
    if not keep_params:
        text = '\n'.join(ln for ln in text.splitlines()
                         if '| INFO |   ' not in ln)
        assert 'log_every_n_steps' not in open_clip.parse_params(text)
    metrics = open_clip.extract_metrics(text)
    reported = [t for i, t in enumerate(TWO_RANKS_BATCH_TIMES) if i not in (3, 4)]
    assert metrics['steps'] == 6
    assert metrics['log_every_n_steps'] == 1
    assert metrics['steps_not_logged'] == 2
    assert metrics['total_time_secs'] == pytest.approx(sum(reported[1:]))
    assert metrics['time_per_iteration_secs_avg'] == pytest.approx(
        sum(reported[1:]) / 5)
    assert metrics['throughput_avg'] == pytest.approx(
        (21.7704 + 37.8823 + 42.4923 + 47.9101 + 43.5830) / 5)


def test_whole_log_has_no_steps_missing():
    metrics = open_clip.extract_metrics(
        read_data('open_clip', 'cpu_2ranks_torchrun.err'))
    assert metrics['log_every_n_steps'] == 1
    assert metrics['steps_not_logged'] == 0


def test_one_step_jump_invents_no_window():
    '''The JUWELS Booster lines with the last one's count moved 2948 steps
    on (16384 samples a step), as a log cut between step 3 and step 2951
    reads: the window stays 1 (the first spacing is one step), the jump's
    line counts its own step only, 2948 steps are not logged. Before: a
    window of 2949 and 2949 x 6.466 s extrapolated from the one line.'''
    text = read_data('open_clip', 'juwels_booster_mmoclip_excerpt.log')
    text = text.replace('[  49152/3200000 (2%)]',
                        f'[{2951 * 16384}/64000000 (76%)]')
    metrics = open_clip.extract_metrics(text)
    assert metrics['log_every_n_steps'] == 1
    assert metrics['steps_not_logged'] == 2948
    assert metrics['total_time_secs'] == pytest.approx(6.655 + 6.466)
    assert metrics['time_per_iteration_secs_avg'] == pytest.approx(
        (6.655 + 6.466) / 2)


def test_one_spacing_of_two_steps_tells_no_window():
    '''The JUWELS Booster excerpt without its middle line, and no Params
    dump: one spacing of 2 steps is a window of 2 or a lost line; the time
    is not known (before: 2 x 6.466 s, from the one line).'''
    lines = read_data('open_clip',
                      'juwels_booster_mmoclip_excerpt.log').splitlines()
    metrics = open_clip.extract_metrics('\n'.join([lines[0], lines[2]]))
    assert metrics['log_every_n_steps'] is None
    assert metrics['steps_not_logged'] is None
    assert metrics['total_time_secs'] is None
    assert metrics['throughput_avg'] is None


def test_window_from_the_common_spacing_despite_a_lost_line():
    '''The OpenCLIP 1.x log every 100 steps (batch 64) without its line at
    19264 samples: spacings 100, 100, 200, 100, 100; the window is the
    majority's 100 (before: 200, the largest), the line after the gap
    averages over its 100 steps, 100 steps are not logged.'''
    text = _drop_train_lines(read_data(
        'open_clip', 'public', 'negclip_bows27_openclip1x.log'), 19264)
    metrics = open_clip.extract_metrics(text)
    kept = [0.559, 0.515, 0.472, 0.463, 0.490]
    assert metrics['log_every_n_steps'] == 100
    assert metrics['steps_not_logged'] == 100
    assert metrics['total_time_secs'] == pytest.approx(100 * sum(kept))
    assert metrics['throughput_avg'] == pytest.approx(
        64 * 500 / (100 * sum(kept)))


def test_spacings_without_a_majority_tell_no_window():
    '''Lines at 1, 101, 301 and 601 steps (100, 200, 300 apart): a window
    of 100 with lost lines, or of 50, 25...: no window, no time.'''
    text = _drop_train_lines(read_data(
        'open_clip', 'public', 'negclip_bows27_openclip1x.log'),
        12864, 25664, 32064)
    metrics = open_clip.extract_metrics(text)
    assert metrics['steps'] == 4
    assert metrics['log_every_n_steps'] is None
    assert metrics['total_time_secs'] is None
