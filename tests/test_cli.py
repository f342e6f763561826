import json
import re
import subprocess
import sys

import pytest

from hpctestlib_ml.commands import suite
from hpctestlib_ml.paths import REPO_ROOT
from conftest import BIN, DATA


def hpcml(*args):
    return subprocess.run([str(BIN / 'hpcml'), *map(str, args)],
                          capture_output=True, text=True)


def test_extract_prints_one_json_object():
    proc = hpcml('extract', 'clip',
                 DATA / 'open_clip' / 'juwels_booster_mmoclip_excerpt.log')
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert metrics['total_time_secs'] == pytest.approx(13.121)
    assert set(metrics) >= {'total_time_secs', 'throughput_avg',
                            'throughput_per_gpu_avg',
                            'time_per_iteration_secs_avg',
                            'done_percent_last', 'steps'}


def test_extract_several_files_names_each():
    proc = hpcml('extract', 'clip', DATA / 'open_clip' / 'cpu_1rank_torchrun.err',
                 DATA / 'open_clip' / 'cpu_2ranks_torchrun.err')
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r['file'].split('/')[-1] for r in rows] == [
        'cpu_1rank_torchrun.err', 'cpu_2ranks_torchrun.err']


def test_extract_bad_input(tmp_path):
    proc = hpcml('extract', 'clip', tmp_path / 'missing.log')
    assert proc.returncode == 1
    assert 'cannot read' in proc.stderr and 'Traceback' not in proc.stderr

    empty = tmp_path / 'empty.log'
    empty.write_text('nothing here\n')
    proc = hpcml('extract', 'clip', empty)
    assert proc.returncode == 1
    assert 'no clip training figures found' in proc.stderr

    proc = hpcml('extract', 'resnet', empty)
    assert proc.returncode == 2
    assert "invalid choice: 'resnet'" in proc.stderr


def test_suite_command_defaults_and_overrides():
    cmd = suite.suite_command([], '/tmp/r.json')
    # ReFrame, with the warnings that hide a mistake made errors.
    assert cmd[:3] == [sys.executable, '-m', 'hpctestlib_ml.strict_reframe']
    assert cmd[3:] == ['-C', str(REPO_ROOT / 'config' / 'local.py'),
                       '--exec-policy=serial',
                       '-c', str(REPO_ROOT / 'checks'), '-r',
                       '--performance-report', '-x', 'Container',
                       '-x', '%scale=1_proc%launch_mode=torchrun',
                       '--report-file', '/tmp/r.json']
    cmd = suite.suite_command(['-C', 'x.py', '--dry-run', '-n', 'MMoCLIP'],
                            '/tmp/r.json')
    assert cmd.count('-C') == 1 and '-r' not in cmd
    assert cmd[-4:] == ['-C', 'x.py', '--dry-run', '-n', 'MMoCLIP'][-4:]
    assert '--exec-policy=serial' not in cmd


@pytest.mark.parametrize('argv, twins', [
    ([], False),
    (['--containers'], True),
    (['-n', 'CosmoFlowContainer'], True),
    (['--name=MatmulRateContainer'], True),
    (['-n', 'CosmoFlow'], False),
])
def test_the_container_twins_run_only_when_asked(argv, twins):
    '''The quick start ran 34 cases before make image and 68 after (every
    twin, twice the time), without a word: the default is the same cases
    either way, and --containers (hpcml suite's own option, never passed
    to reframe) adds the twins.'''
    cmd = suite.suite_command(argv, '/tmp/r.json')
    assert ('Container' in cmd[cmd.index('-x') + 1:cmd.index('-x') + 2]
            if '-x' in cmd else False) is not twins
    assert '--containers' not in cmd


@pytest.mark.parametrize('argv, left_out', [
    ([], True),
    (['--containers'], True),
    (['-n', 'CosmoFlow'], False),           # the user's selection stands
    (['-x', 'Storage'], False),
    (['-C', 'config/slurm.py'], False),     # a site's session: every case
])
def test_the_quick_start_leaves_out_the_one_rank_torchrun_cases(
        argv, left_out, monkeypatch):
    '''The quick start (make suite: the local config, no selection) runs
    each check in one rank per task and in two under torchrun, within 5
    minutes on a 2-core VM; the one-rank torchrun cases run when asked.'''
    monkeypatch.chdir(REPO_ROOT)
    cmd = suite.suite_command(argv, '/tmp/r.json')
    assert ('%scale=1_proc%launch_mode=torchrun' in cmd) is left_out


@pytest.mark.parametrize('argv, serial', [
    ([], True),
    (['-C', 'config/local.py'], True),
    ([f'--config-file={REPO_ROOT}/config/local.py'], True),
    (['-C', 'config/slurm.py'], False),
    (['--exec-policy', 'async'], False),  # the user's choice stands
])
def test_the_local_config_runs_one_case_at_a_time_across_partitions(
        argv, serial, monkeypatch):
    # local.py's max_jobs 1 is per partition: with a cpu and a gpu
    # partition the async policy ran a case of each at once.
    monkeypatch.chdir(REPO_ROOT)
    cmd = suite.suite_command(argv, '/tmp/r.json')
    assert ('--exec-policy=serial' in cmd) is serial


@pytest.mark.parametrize('workload, log, key, value', [
    # An excerpt (iterations 10-50 of 3,125,000): part of a run, printed
    # with --partial, marked so (test_extract_refuses_part_of_a_run).
    ('megatron', 'megatron/jubench_readme_verification.log',
     'printed_tflops_per_gpu', 135.855),
    ('gpt2_finetune', 'hf_trainer/transformers4_train_metrics_over_an_hour.txt',
     'train_runtime', 6132.36),
    ('bert', 'mllog/amd_rocm_blog_bert_mi300x_excerpt.log',
     'run_time_secs', 462.76),
    # Trains 7 epochs past run_stop: the quality is the run's own (epoch
    # 23's 0.12198), not the last logged (0.388).
    ('cosmoflow', 'mllog/mlperf/cosmoflow_hpe_lbnl_v3.0_perlmutter_n128.log',
     'eval_error', 0.1219817),
    ('cosmoflow', 'mllog/mlperf/cosmoflow_hpe_lbnl_v3.0_perlmutter_n128.log',
     'epochs', 23),
])
def test_extract_every_workload_from_published_logs(workload, log, key,
                                                    value):
    proc = subprocess.run([str(BIN / 'hpcml'), 'extract', '--partial',
                           workload, str(DATA / log)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[key] == pytest.approx(value)


def test_extract_refuses_part_of_a_run():
    # jubench's README shows iterations 10-50 of 3,125,000 and no end: no
    # result, one line on stderr; --partial prints it, marked partial.
    log = DATA / 'megatron' / 'jubench_readme_verification.log'
    proc = hpcml('extract', 'megatron', log)
    assert proc.returncode == 1 and proc.stdout == ''
    assert proc.stderr.count('\n') == 1
    assert ("not a result (cut): the log ends mid-run: Megatron's training "
            'iterations but no [after training is done] (last iteration 50 '
            'of 3125000)') in proc.stderr
    proc = hpcml('extract', '--partial', 'megatron', log)
    assert proc.returncode == 0
    metrics = json.loads(proc.stdout)
    assert metrics['partial'] is True
    assert metrics['partial_reason'].startswith('cut: the log ends mid-run')
    assert 'warning: partial figures, not a result (cut)' in proc.stderr


def test_triage_prints_one_json_object_per_file(tmp_path):
    public = DATA / 'triage' / 'public'
    proc = hpcml('triage', public / 'hafs101_srun_oom_kill_task4.log',
                 public / 'dolly139_enospc_torch_save.log',
                 DATA / 'open_clip' / 'cpu_1rank_torchrun.err')
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [set(r) for r in rows] == [{'file', 'category', 'reason', 'rank',
                                       'node'}] * 3
    assert [r['category'] for r in rows] == ['out_of_memory', 'filesystem',
                                             None]
    assert (rows[0]['rank'], rows[0]['node']) == ('4', 'Orion-01-01')
    assert rows[1]['reason'].endswith('No space left on device')
    assert rows[2]['reason'] == 'no failure found in the log'


def test_triage_of_a_file_it_cannot_read(tmp_path):
    proc = hpcml('triage', tmp_path / 'missing.log',
                 DATA / 'triage' / 'public' / 'therock1054_hip_oom.log')
    assert proc.returncode == 1
    assert 'hpcml triage: cannot read' in proc.stderr
    assert 'Traceback' not in proc.stderr
    assert json.loads(proc.stdout)['category'] == 'out_of_memory'


def test_help_lists_the_registered_commands(monkeypatch):
    '''hpcml --help lists cli.COMMANDS, each with its HELP, and no list
    written by hand (one once left out report and references); no RST
    markup in a terminal's text.'''
    from hpctestlib_ml import cli
    text = cli.parser().format_help()
    for name in cli.COMMANDS:
        assert re.search(rf'^ +{re.escape(name)}\s', text, re.M), name
    assert '``' not in text
    monkeypatch.setattr(cli, 'COMMANDS', {'triage': 'triage'})
    text = cli.parser().format_help()
    assert 'triage' in text
    assert not any(name in text for name in ('references', 'report',
                                             'new-workload'))
