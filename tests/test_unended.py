"""A run that did not end is not a result (issue 39, section 1): ``hpcml
extract``, ``triage`` and ``compliance`` on logs of runs that were
aborted, spent their budget, died in their warm-up, were cut or failed
(hpctestlib_ml/run_end.py). The logs written for these tests, and the
real formats each is modelled on, are in tests/data/unended/README.md;
pdsh's labels are tested in tests/test_labels.py."""
import json

import pytest

from conftest import DATA, read_data
from hpctestlib_ml import cli, triage

UNENDED = DATA / 'unended'
ABORTED = UNENDED / 'bert_v4.0_aborted_target_missed.log'
BUDGET = UNENDED / 'bert_v4.0_budget_spent_no_run_stop.log'
CUT_WARMUP = UNENDED / 'resnet50_tf_hvd2_cut_in_warmup.log'
OOM_WARMUP = UNENDED / 'resnet50_tf_hvd2_oom_in_warmup.log'
PDSH = UNENDED / 'megds_pdsh_2nodes.log'
CFLOG = DATA / 'mllog' / 'cosmoflow_tiny_cpu_2ranks_torchrun.out'


def hpcml(capsys, *args):
    '''``hpcml ARGS`` in this process: (exit status, stdout, stderr).'''
    status = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def refused(capsys, *args):
    '''The one line ``hpcml ARGS`` says on stderr where it refuses its
    log: nothing on stdout, a non-zero exit status.'''
    status, out, err = hpcml(capsys, *args)
    assert status != 0 and out == '', (status, out, err)
    assert len(err.strip().splitlines()) == 1, err
    return status, err


def test_aborted_mlperf_run_gives_no_run_time(capsys):
    '''run_stop says "aborted" (BERT trained its 3,680 steps and stopped
    at 0.7186 < 0.720): no run_time_secs with exit 0. The line names the
    status and the quality against the target.'''
    status, err = refused(capsys, 'extract', 'bert', ABORTED)
    assert status == 1
    assert ("not a result (aborted): MLPerf's run_stop says status "
            "'aborted': eval_accuracy 0.7186 (bert's target >= 0.72, not "
            'reached), after 3297280 samples') in err
    assert "result summarizer drops such a run" in err
    # --partial: what could be read, marked partial (the run time is the
    # program's, not a time to train).
    status, out, err = hpcml(capsys, 'extract', '--partial', 'bert',
                             ABORTED)
    metrics = json.loads(out)
    assert status == 0 and metrics['partial'] is True
    assert metrics['partial_reason'].startswith("aborted: MLPerf's run_stop "
                                                "says status 'aborted'")
    assert metrics['status'] == 'aborted'
    assert metrics['run_time_secs'] == pytest.approx(226.349)
    assert 'warning: partial figures' in err


def test_aborted_mlperf_run_in_triage_and_compliance(capsys):
    status, out, _ = hpcml(capsys, 'triage', ABORTED)
    found = json.loads(out)
    assert status == 0 and found['category'] is None
    assert found['reason'].startswith("MLPerf's run_stop says status "
                                      "'aborted': eval_accuracy 0.7186")
    # Before, "passed but for what only a full run meets", exit 0.
    status, err = refused(capsys, 'compliance', ABORTED)
    assert status == 2 and "not a result (aborted)" in err
    status, out, _ = hpcml(capsys, 'compliance', '--partial', ABORTED)
    assert status == 0
    assert out.splitlines()[0].endswith(
        "(partial: not a result (aborted): MLPerf's run_stop says status "
        "'aborted': eval_accuracy 0.7186 (bert's target >= 0.72, not "
        "reached), after 3297280 samples: MLPerf's result summarizer drops "
        'such a run (no time to train))')
    assert 'full run only: Failed checks for eval_accuracy' in out


def budget_variants():
    '''The budget-spent log (its last evaluation at the budget), and two
    variants: its training loop's end logged after an evaluation short of
    the budget (``train_samples`` after ``run_start``, as BERT logs it at
    the end of its loop), and a budget stated as
    ``max_samples_termination`` only: (text, what was spent, quality).'''
    text = BUDGET.read_text()
    lines = ABORTED.read_text().splitlines()
    loop_over = '\n'.join(
        ln for ln in text.splitlines()
        if '3297280' not in ln and "'global_steps': 3680" not in ln) + '\n'
    loop_over += '\n'.join(ln for ln in lines if '"train_samples"' in ln)
    samples_only = '\n'.join(
        ln for ln in text.splitlines()
        if 'opt_learning_rate_training_steps' not in ln).replace(
        'max_samples_termination=4500000.0',
        'max_samples_termination=3000000.0') + '\n'
    steps = '(3680 steps x global batch 896)'
    return {
        'last eval at the budget': (
            text, f'3297280 samples of its 3297280 {steps}', 0.7186),
        'train_samples logged': (
            loop_over, f'3297280 samples of its 3297280 {steps}', 0.7183),
        'max_samples_termination': (
            samples_only, '3297280 samples of its 3000000 '
            '(max_samples_termination)', 0.7186)}


@pytest.mark.parametrize('variant', sorted(budget_variants()))
def test_budget_spent_without_run_stop_names_the_budget(capsys, tmp_path,
                                                        variant):
    '''No run_stop, but the run trained its whole sample budget below the
    target: that is its end, not "killed or the log cut".'''
    text, spent, quality = budget_variants()[variant]
    log = tmp_path / 'bert.log'
    log.write_text(text)
    status, err = refused(capsys, 'extract', 'bert', log)
    assert status == 1
    assert ('not a result (budget): the run spent its budget without '
            f'reaching the target: {spent}, eval_accuracy {quality} (bert\'s '
            'target >= 0.72, not reached)') in err
    assert 'killed' not in err and 'was cut' not in err
    reason = triage.triage(text).reason
    assert reason.startswith('the run spent its budget') and \
        'killed' not in reason
    assert 'not a result (budget)' in refused(capsys, 'compliance', log)[1]


def test_a_run_cut_before_its_budget_is_a_cut_log(capsys, tmp_path):
    # The same log cut two evaluations earlier: 2.25 M of 3.3 M samples.
    lines = BUDGET.read_text().splitlines()
    end = max(i for i, ln in enumerate(lines) if '"epoch_num": 2250150' in ln)
    log = tmp_path / 'bert.log'
    log.write_text('\n'.join(lines[:end + 1]) + '\n')
    _, err = refused(capsys, 'extract', 'bert', log)
    assert ("not a result (cut): the log ends mid-run: MLPerf's run_start but "
            'no run_stop (after 2250150 samples)') in err


@pytest.mark.parametrize('log, words', [
    # Ends at "Running warm up": like Megatron and Trainer logs with no
    # step, refused; before, exit 0 with every rate null.
    (CUT_WARMUP, 'not a result (no_step): the run stopped before its first '
                 'measured step (in its warm-up): tf_cnn_benchmarks started '
                 'and logged no step; its last line: Running warm up'),
    # Rank 1 out of memory in the warm-up: the failure, in triage's words.
    (OOM_WARMUP, 'not a result (failed): the run failed (before its first '
                 'measured step): out_of_memory: tensorflow.python.framework.'
                 'errors_impl.ResourceExhaustedError: OOM when allocating '
                 'tensor with shape[256,64,112,112]'),
], ids=['cut', 'oom'])
def test_tf_cnn_benchmarks_run_that_died_in_warm_up(capsys, log, words):
    status, err = refused(capsys, 'extract', 'resnet50', log)
    assert status == 1 and words in err


def test_tf_cnn_benchmarks_warm_up_death_in_triage(capsys):
    status, out, _ = hpcml(capsys, 'triage', CUT_WARMUP)
    found = json.loads(out)
    # Before: "no training log recognised", exit 1.
    assert status == 0 and found['category'] is None
    assert found['reason'].startswith('the run stopped before its first '
                                      'measured step (in its warm-up)')
    status, out, _ = hpcml(capsys, 'triage', OOM_WARMUP)
    assert json.loads(out)['category'] == 'out_of_memory'


@pytest.mark.parametrize('workload, text, words', [
    # Megatron's start (argument dump) and no iteration line.
    ('megatron', '\n'.join(
        ln for ln in PDSH.read_text().splitlines()
        if 'iteration ' not in ln and 'after training' not in ln),
     'not a result (no_step): the run stopped before its first measured '
     'step: Megatron started and logged no step'),
    # Trainer's "***** Running training *****" and no step.
    ('gpt2_finetune', '***** Running training *****\n  Num examples = 2,318'
     '\n  Num Epochs = 3\n  Total optimization steps = 870\n',
     'not a result (no_step): the run stopped before its first measured '
     'step: HF Trainer started and logged no step'),
], ids=['megatron', 'hf_trainer'])
def test_every_reader_refuses_a_run_with_no_measured_step(capsys, tmp_path,
                                                         workload, text,
                                                         words):
    log = tmp_path / 'job.out'
    log.write_text(text)
    status, err = refused(capsys, 'extract', workload, log)
    assert words in err


def cut_mid_run_stop():
    '''The suite's CosmoFlow log cut in the middle of its run_stop line:
    ``..."key": "run_stop", "value`` (the bad-input round's row 60).'''
    text = CFLOG.read_text()
    cut = '"key": "run_stop", "value'
    return text[:text.index(cut) + len(cut)]


def test_a_line_cut_in_the_middle_is_a_cut_log_everywhere(capsys, tmp_path):
    log = tmp_path / 'cut.log'
    log.write_text(cut_mid_run_stop())
    words = ('not a result (cut): the log is cut: it ends in the middle of '
             'its run_stop record')
    status, err = refused(capsys, 'extract', 'cosmoflow', log)
    assert status == 1 and words in err and ', at epoch 1, step 20)' in err
    status, out, _ = hpcml(capsys, 'triage', log)
    # Before: "no failure found in the log" (the half line matched).
    assert json.loads(out)['reason'].startswith(
        'the log is cut: it ends in the middle of its run_stop record')
    # Before: violations, exit 1, as if the log were a whole run's.
    status, err = refused(capsys, 'compliance', log)
    assert status == 2 and words in err
    status, out, err = hpcml(capsys, 'extract', '--partial', 'cosmoflow',
                             log)
    assert status == 0 and json.loads(out)['partial_reason'].startswith(
        'cut: the log is cut')


@pytest.mark.parametrize('workload, path, words', [
    # Slurm's time limit after iteration 17: the end the log shows.
    ('megatron', ('megatron', 'public',
                  'rocm_mi300x_gqa24_swiglu_56l_2025_11.log'),
     'not a result (failed): the run failed (last iteration 17 of 20): '
     'scheduler: Slurm ended the job at its time limit'),
    # An issue's copy of 5 iterations, the last line cut by the README.
    ('megatron', ('megatron', 'public', 'jubench_13B_readme.log'),
     'not a result (cut): the log is cut: it ends in the middle of an '
     'iteration line'),
    # Step lines and no "total images/sec".
    ('resnet50', ('tf_cnn_benchmarks', 'public',
                  'benchmarks30_numgpus4_steps_only.log'),
     "not a result (cut): the log ends mid-run: tf_cnn_benchmarks' step "
     'lines but no total images/sec (last step 50)'),
    # A rank that could not import its package.
    ('clip', ('open_clip', 'missing_pandas_torchrun.err'),
     'not a result (failed): the run failed: software: rank 0 on localhost '
     "(exit code 1): clip_train: cannot import OpenCLIP (No module named "
     "'pandas')"),
], ids=['time-limit', 'cut-line', 'no-total', 'failed'])
def test_every_reader_names_the_end_its_log_shows(capsys, workload, path,
                                                  words):
    status, err = refused(capsys, 'extract', workload, DATA.joinpath(*path))
    assert status == 1 and words in err


@pytest.mark.parametrize('workload, path', [
    ('bert', ('mllog', 'mlperf', 'bert_fujitsu_v4.0_gx2560m7_excerpt.log')),
    ('bert', ('mllog', 'mlperf', 'bert_dell_v1.0_dss8440.log')),
    ('cosmoflow', ('mllog', 'mlperf',
                   'cosmoflow_hpe_lbnl_v3.0_perlmutter_n128.log')),
    ('deeplabv3plus', ('mllog', 'mlperf', 'deepcam_dell_v3.0_32xxe8545.log')),
    ('alphafold2', ('mllog', 'mlperf',
                    'openfold_tacc_v3.0_lonestar6_n32.log')),
    ('cosmoflow', ('mllog', 'cosmoflow_tiny_cpu_2ranks_torchrun.out')),
    ('bert', ('mllog', 'bert_tiny_cpu_2ranks_torchrun.out')),
    ('megatron', ('megatron', 'mcore_cpu_2ranks_torchrun.out')),
    # Its planned 10 iterations logged, no end record copied.
    ('megatron', ('megatron', 'public', 'megds_tgs_1536gbs_stuck_loss.log')),
    ('megatron', ('unended', 'megds_pdsh_2nodes.log')),
    ('gpt2_finetune', ('hf_trainer', 'gpt2_tiny_cpu_2ranks_torchrun.out')),
    ('gpt2_finetune', ('hf_trainer', 'public',
                       'tpu_v5p_llama2_7b_run_clm_worker_label.log')),
    ('resnet50', ('tf_cnn_benchmarks', 'public',
                  'batchai_hvd8_resnet101.log')),
    ('resnet50', ('tf_cnn_benchmarks',
                  'resnet50_tf_tiny_cpu_2ranks_torchrun.out')),
    ('clip', ('open_clip', 'cpu_2ranks_torchrun.err')),
])
def test_runs_that_ended_are_whole_with_or_without_partial(capsys, workload,
                                                           path):
    log = DATA.joinpath(*path)
    for args in (('extract', workload, log),
                 ('extract', '--partial', workload, log)):
        status, out, err = hpcml(capsys, *args)
        assert status == 0 and 'partial' not in out, err


def test_quality_targets_are_mlperfs_own_rules():
    '''The targets the reasons name come from mlcommons/logging's
    compliance checker (closed_<benchmark>.yaml, the newest ruleset of
    each), not from a table here.'''
    from hpctestlib_ml import run_end
    targets = run_end.quality_targets()
    assert targets['bert'] == ('eval_accuracy', '>=', 0.72)
    assert targets['cosmoflow'] == ('eval_error', '<=', 0.124)
    assert targets['deepcam'] == ('eval_accuracy', '>=', 0.82)
    assert targets['openfold'] == ('eval_accuracy', '>=', 0.8)
    assert targets['llama31_8b'] == ('eval_accuracy', '<=', 3.3)
