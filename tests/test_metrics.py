"""The one metrics contract (hpctestlib_ml.metrics): every parser's record
names each idea once, ``hpcml extract`` keeps each format's keys, and the
checks every workload shares print one message per defect, whichever
workload's log shows it (the suite's own 2-rank logs in tests/data, with
one defect put in)."""
import math
import re

import pytest

from conftest import extract, read_data
from hpctestlib_ml.metrics import TrainingLog, common_problems
from hpctestlib_ml.parsers import (hf_trainer, mllog, open_clip,
                                   tf_cnn_benchmarks)
from hpctestlib_ml.workloads import (clip, gpt2_finetune, megatron, mlperf,
                                     resnet50)
from hpctestlib_ml.parsers import megatron as megatron_parser


# The record itself
def test_loss_first_and_last_come_from_the_losses():
    log = TrainingLog(losses=[3.0, 2.0, 1.5])
    assert (log.loss_first, log.loss_last) == (3.0, 1.5)
    assert TrainingLog().loss_last is None


def test_as_dict_names_fields_per_format():
    log = TrainingLog(steps=8, world_size=2, losses=[],
                      figures={'iterations': 8})
    assert log.as_dict({'steps': 'iteration_last',
                        'losses_finite': 'loss_all_finite'}) == {
        'iteration_last': 8, 'loss_all_finite': None, 'iterations': 8}
    assert log.as_dict({'losses_finite': 'losses_finite'},
                       no_loss_is_finite=True) == {
        'losses_finite': True, 'iterations': 8}


#: The keys ``hpcml extract`` has printed for each format (tests/test_cli.py
#: and scripts read them): the contract must not change them.
JSON_KEYS = {
    'clip': {
        'steps', 'log_every_n_steps', 'steps_not_logged', 'total_time_secs',
        'time_per_iteration_secs_avg', 'throughput_avg',
        'throughput_per_gpu_avg', 'data_share', 'done_percent_last',
        'loss_last', 'losses', 'loss_all_finite', 'timed_window'},
    'megatron': {
        'iterations', 'iteration_last', 'train_iters', 'loss_last',
        'losses', 'loss_all_finite', 'skipped_iterations', 'nan_iterations',
        'time_per_iteration_secs', 'tokens_per_second', 'tflops_per_gpu',
        'printed_tflops_per_gpu', 'flops_formula', 'timed_window'},
    'gpt2_finetune': {
        'train_samples_per_second', 'train_runtime', 'train_loss',
        'eval_loss', 'perplexity', 'steps', 'max_steps', 'world_size',
        'model_shape', 'loss_first', 'loss_last', 'losses', 'losses_finite',
        'samples_per_second', 'samples_per_second_per_gpu',
        'time_per_step_secs', 'timed_window'},
    'bert': {
        'events', 'benchmark', 'global_batch_size', 'world_size',
        'eval_accuracy', 'eval_error', 'throughput_records', 'steps',
        'epochs', 'status', 'run_time_secs', 'loss_first', 'loss_last',
        'losses', 'losses_finite', 'samples_per_second',
        'time_per_step_secs', 'timed_window'},
    'resnet50': {
        'model', 'global_batch_size', 'steps', 'workers', 'devices',
        'images_per_second', 'images_per_second_per_gpu',
        'time_per_step_secs', 'loss_last', 'losses', 'losses_finite',
        'timed_window'},
}

#: The suite's own 2-rank CPU logs, one per format, and the runs they are
#: of: (workload, log, parser, steps asked, global batch).
RUNS = {
    'clip': (('open_clip', 'cpu_2ranks_torchrun.err'), open_clip, None, 64),
    'megatron': (('megatron', 'mcore_cpu_2ranks_torchrun.out'),
                 megatron_parser, 8, None),
    'gpt2_finetune': (('hf_trainer', 'gpt2_tiny_cpu_2ranks_torchrun.out'),
                      hf_trainer, None, None),
    'bert': (('mllog', 'bert_tiny_cpu_2ranks_torchrun.out'), mllog, 10,
             None),
    'resnet50': (('tf_cnn_benchmarks',
                  'resnet50_tf_tiny_cpu_2ranks_torchrun.out'),
                 tf_cnn_benchmarks, 10, None),
}


def _text(workload):
    return read_data(*RUNS[workload][0])


def _log(workload, text=None):
    return RUNS[workload][1].training_log(
        _text(workload) if text is None else text)


@pytest.mark.parametrize('workload', sorted(RUNS))
def test_extract_keeps_each_formats_keys(workload):
    text = _text(workload)
    assert set(extract(workload, text)) == JSON_KEYS[workload]
    assert set(extract(workload, 'nothing')) == JSON_KEYS[workload]


@pytest.mark.parametrize('workload, steps', [
    ('clip', 8), ('megatron', 8), ('gpt2_finetune', 40), ('bert', 10),
    ('resnet50', 10)])
def test_every_parser_fills_the_common_fields(workload, steps):
    log = _log(workload)
    assert log.steps == steps and log.world_size == 2
    assert log.losses and log.losses_finite is True
    assert log.loss_last == log.losses[-1]
    assert log.timed_window is not None


def test_no_loss_is_none_in_the_record_and_true_in_old_json():
    '''A log without losses: None in the record (no loss is not a finite
    loss); the JSON of Trainer, tf_cnn_benchmarks and Megatron printed
    True (all of none), and still does.'''
    text = re.sub(r"^\{'loss': .*$", '', _text('gpt2_finetune'),
                  flags=re.M)
    assert hf_trainer.training_log(text).losses_finite is None
    assert hf_trainer.extract_metrics(text)['losses_finite'] is True
    assert mllog.extract_metrics('')['losses_finite'] is None


# The checks every workload shares
def test_common_problems_of_a_good_log():
    log = TrainingLog(steps=10, world_size=2, losses=[2.0, 1.0],
                      losses_finite=True)
    assert common_problems(log, 10, 2) == []
    assert common_problems(log, None, None) == []


@pytest.mark.parametrize('fields, expected', [
    (dict(steps=0), ['no training step logged']),
    (dict(steps=None), ['no training step logged']),
    (dict(steps=7), ['7 of 10 steps logged']),
    (dict(world_size=1),
     ['training ran with world size 1, the job has 2 ranks']),
    (dict(world_size=None),
     ['the log shows no world size, the job has 2 ranks']),
    (dict(ranks=frozenset({0})), ['1 of 2 ranks started (missing: [1])']),
    (dict(losses_finite=False), ['training loss is not finite']),
])
def test_common_problems_one_message_per_defect(fields, expected):
    log = TrainingLog(**{**dict(steps=10, world_size=2, losses=[1.0],
                                losses_finite=True), **fields})
    assert common_problems(log, 10, 2) == expected


def test_a_missing_loss_fails_only_where_required():
    log = TrainingLog(steps=10, world_size=2)
    assert common_problems(log, 10, 2) == []
    assert common_problems(log, 10, 2, loss_required=True) == [
        'no training loss logged']


def _problems(workload, text, world_size=2, more_steps=0):
    '''*workload*'s own sanity reasons for *text*, as its check would
    give them for the run of RUNS on *world_size* ranks, asked for
    *more_steps* than that run.'''
    log = _log(workload, text)
    steps = RUNS[workload][2]
    steps = steps + more_steps if steps is not None else None
    if workload == 'clip':
        return clip.log_problems(text, log, world_size, RUNS['clip'][3],
                                 benchmark=False)
    if workload == 'megatron':
        return megatron.log_problems(log, steps, world_size)
    if workload == 'gpt2_finetune':
        return gpt2_finetune.log_problems(log, world_size)
    if workload == 'bert':
        return mlperf.log_problems(log, steps, world_size)
    return resnet50.log_problems(log, steps, world_size)


#: Puts a NaN loss into a log of each format (its third logged loss).
NAN_LOSS = {
    'clip': (r'(?<![A-Za-z_])Loss: [\d.]+ \([\d.]+\)', 'Loss: nan (nan)'),
    'megatron': (r'lm loss: [^|]*\|', 'lm loss: nan |'),
    'gpt2_finetune': (r"'loss': '[^']*'", "'loss': 'nan'"),
    'bert': (r'"loss": [-\d.eE+]+', '"loss": NaN'),
    'resnet50': (r'(\(jitter = [\d.]+\)\s+)\S+', r'\1nan'),
}


def _third_replaced(text, pattern, replacement):
    matches = list(re.finditer(pattern, text))
    match = matches[2]
    return (text[:match.start()] + match.expand(replacement) +
            text[match.end():])


@pytest.mark.parametrize('workload', sorted(RUNS))
def test_the_real_logs_pass(workload):
    assert _problems(workload, _text(workload)) == []


@pytest.mark.parametrize('workload', sorted(RUNS))
def test_a_nan_loss_reads_the_same_in_every_workload(workload):
    text = _third_replaced(_text(workload), *NAN_LOSS[workload])
    assert _log(workload, text).losses_finite is False
    assert _problems(workload, text) == ['training loss is not finite']


@pytest.mark.parametrize('workload', ['megatron', 'gpt2_finetune', 'bert',
                                      'resnet50'])
def test_a_missing_rank_reads_the_same_in_every_workload(workload):
    '''The job had 3 ranks; the log's world is 2.'''
    assert _problems(workload, _text(workload), world_size=3) == [
        'training ran with world size 2, the job has 3 ranks']


def test_openclip_names_the_missing_rank():
    '''OpenCLIP's log names each rank that started: the one message says
    which is missing.'''
    assert _problems('clip', _text('clip'), world_size=3) == [
        '2 of 3 ranks started (missing: [2])']


def test_a_rank_that_did_not_finish_tf_cnn_benchmarks():
    '''Each rank prints the job's rate last: one rank's line gone.'''
    text = _text('resnet50')
    cut = text.rfind('total images/sec')
    text = text[:cut] + text[cut:].replace('total images/sec', 'lost', 1)
    assert _problems('resnet50', text) == [
        'training ran with world size 1, the job has 2 ranks']


#: The lines of a log's last two steps (the runs of RUNS): cut out, the
#: run stopped two steps short. An MLPerf log would lose its run_stop too,
#: so there the job asks for two more instead.
LAST_TWO_STEPS = {
    'megatron': r'iteration\s+[78]/',
    'gpt2_finetune': r'\[hpcml\] step (39|40)/',
    'resnet50': r'^(9|10)\s+images/sec',
}


@pytest.mark.parametrize('workload', ['megatron', 'gpt2_finetune', 'bert',
                                      'resnet50'])
def test_missing_steps_read_the_same_in_every_workload(workload):
    text, more_steps = _text(workload), 2
    if workload in LAST_TWO_STEPS:
        text = '\n'.join(line for line in text.splitlines()
                          if not re.search(LAST_TWO_STEPS[workload], line))
        more_steps = 0
    done = _log(workload, text).steps
    assert _problems(workload, text, more_steps=more_steps) == [
        f'{done} of {done + 2} steps logged']


@pytest.mark.parametrize('workload', sorted(RUNS))
def test_a_log_without_steps_reads_the_same(workload):
    '''The format's lines are there, its step lines are not (the workloads
    whose format has none to show say so first).'''
    text = _text(workload)
    step_lines = {
        'clip': r'Train Epoch',
        'megatron': None,
        'gpt2_finetune': r'\[hpcml\] step ',
        'bert': r'"step_num"',
        'resnet50': r'images/sec: [\d.]+ \+/-',
    }[workload]
    if step_lines is None:
        assert megatron.log_problems(_log(workload, ''), 8, 2) == [
            'no Megatron iteration line in the log']
        return
    text = '\n'.join(line for line in text.splitlines()
                     if not re.search(step_lines, line))
    assert 'no training step logged' in _problems(workload, text)


def test_losses_are_floats_in_every_record():
    for workload in RUNS:
        assert all(isinstance(v, float) and math.isfinite(v)
                   for v in _log(workload).losses)
