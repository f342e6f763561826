"""CLIP's sanity reasons, on captured logs."""
import re

from hpctestlib_ml.workloads import clip
from hpctestlib_ml.parsers.open_clip import training_log
from conftest import read_data


def log_problems(text, world_size, global_batch, benchmark):
    return clip.log_problems(text, training_log(text), world_size,
                             global_batch, benchmark)

TWO_RANKS = read_data('open_clip', 'cpu_2ranks_torchrun.err')


def test_good_two_rank_run_has_no_problems():
    assert log_problems(TWO_RANKS, 2, 64, benchmark=False) == []


def test_missing_rank():
    problems = log_problems(TWO_RANKS, 3, 96, benchmark=False)
    assert problems[0] == '2 of 3 ranks started (missing: [2])'


def test_loss_proves_gathered_features():
    problems = log_problems(TWO_RANKS, 2, 32, benchmark=False)
    assert problems == ['loss 4.1589 is not ln(global batch 32) = 3.4657: '
                        'features were not gathered across all ranks']


def test_stopped_early():
    lines = TWO_RANKS.splitlines()
    last_train = max(i for i, ln in enumerate(lines) if 'Train Epoch' in ln)
    cut = '\n'.join(lines[:last_train])
    assert 'training stopped at 88% of the epoch' in log_problems(
        cut, 2, 64, benchmark=False)


def test_tiny_run_does_not_meet_mmoclip_rules():
    problems = log_problems(TWO_RANKS, 2, 64, benchmark=True)
    assert len(problems) == 1
    assert problems[0].startswith("MMoCLIP rules not met: {'model': "
                                  "'CLIP-tiny', 'train_num_samples': '512'}")


def test_run_meeting_mmoclip_rules():
    # The tiny run already logs synthetic data, 1 epoch, local loss,
    # gather-with-grad and every step; give it the benchmark's model and size.
    text = TWO_RANKS.replace('model: CLIP-tiny', 'model: ViT-L-14')
    text = text.replace('train_num_samples: 512', 'train_num_samples: 3200000')
    assert log_problems(text, 2, 64, benchmark=True) == []


def test_refused_run():
    assert log_problems(read_data('open_clip', 'refused_existing_name.out'),
                        1, 32, benchmark=False) == [
        'OpenCLIP refused to run: the experiment name already exists under '
        'logs/']


def _without_train_lines(text, *samples):
    '''*text* less the training lines at those sample counts.'''
    return '\n'.join(ln for ln in text.splitlines()
                     if not re.search(rf'Train Epoch: \d+ \[\s*(?:'
                                      rf'{"|".join(map(str, samples))})/', ln))


def test_missing_steps_fail_the_run():
    '''MMoCLIP (and every run of the suite) logs every step: deleting the
    lines of steps 4 and 5 must fail the check, whatever the rest says.'''
    text = _without_train_lines(TWO_RANKS, 256, 320)
    assert log_problems(text, 2, 64, benchmark=False) == [
        '2 steps not logged: lines are missing between logged steps']


def test_log_without_its_first_steps_fails():
    text = _without_train_lines(TWO_RANKS, 64)
    assert log_problems(text, 2, 64, benchmark=False) == [
        'the log begins at 128 samples, not at the first step (64)']


def test_window_above_one_fails():
    text = TWO_RANKS.replace('log_every_n_steps: 1', 'log_every_n_steps: 2')
    assert 'not every step logged: log_every_n_steps is 2, not 1' in \
        log_problems(text, 2, 64, benchmark=False)


def test_restarted_run_fails():
    '''The run's log twice over, as a restart into the same log leaves it:
    step counts go back, so the steps cannot be told apart.'''
    assert 'the logged steps do not follow one another (a restart, or lines '\
        'out of order)' in log_problems(TWO_RANKS + TWO_RANKS, 2, 64,
                                        benchmark=False)
