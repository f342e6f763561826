"""ReFrame's own conventions hold: the command users type finds the suite,
and the directory options put things where ReFrame users expect."""
import os
import subprocess

import pytest

from conftest import BIN, REPO, local_case_count

pytestmark = pytest.mark.integration

ONE_CASE = ('-n', '^CosmoFlow%scale=1_proc%launch_mode=per_task')


def reframe(tmp_path, cache_dir, *args, **env):
    full_env = {**os.environ, 'HPCML_VAR_DIR': str(tmp_path / 'var'),
                'HPCML_CACHE_DIR': str(cache_dir), **env}
    for name in ('RFM_CONFIG_FILES', 'RFM_CONFIG_FILE', 'RFM_CONFIG_PATH'):
        if name not in env:
            full_env.pop(name, None)
    return subprocess.run([str(BIN / 'reframe'), *map(str, args)],
                          cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)


def test_plain_reframe_in_the_projects_environment_runs_the_cpu_suite(
        tmp_path, cache_dir):
    '''`reframe -c checks` with no -C: config/local.py, through the .pth
    file that `make setup` writes (hpctestlib_ml.venv_config).'''
    proc = reframe(tmp_path, cache_dir, '-c', REPO / 'checks', '--list')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"settings files:    '<builtin>', '{REPO}/config/local.py'" \
        in proc.stdout
    assert "selected system:   'local'" in proc.stdout
    # Every workload's and component's cases that fit this machine, and
    # their *Container twins where the image is built (Podman).
    assert f'Found {local_case_count()} check(s)' in proc.stdout


def test_an_explicit_configuration_still_wins(tmp_path, cache_dir):
    proc = reframe(tmp_path, cache_dir, '-C', REPO / 'config/slurm.py',
                   '-c', REPO / 'checks/cosmoflow.py', '--list')
    assert "selected system:   'slurm'" in proc.stdout, proc.stdout


def test_reframes_builtin_system_says_what_to_pass(tmp_path, cache_dir):
    proc = reframe(tmp_path, cache_dir, '-c', REPO / 'checks', '--list',
                   RFM_CONFIG_PATH=str(tmp_path))
    assert "selected system:   'generic'" in proc.stdout
    warnings = [line for line in proc.stdout.splitlines() if 'hpcml:' in line]
    assert len(warnings) == 1, proc.stdout
    assert 'pass -C config/local.py' in warnings[0]


def test_prefix_moves_stage_output_and_perflogs(tmp_path, cache_dir):
    prefix = tmp_path / 'elsewhere'
    proc = reframe(tmp_path, cache_dir, '-C', REPO / 'config/local.py',
                   '-c', REPO / 'checks/cosmoflow.py', *ONE_CASE,
                   '--dry-run', '--prefix', prefix)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(prefix.glob('stage/local/cpu/python/*/rfm_job.sh'))
    assert list(prefix.glob('perflogs/local/cpu/CosmoFlow.log'))
    var = tmp_path / 'var'
    assert not (var / 'stage').exists() and not (var / 'perflogs').exists()
    # One session's results stay together: its run report too
    # (siteconfig.results_dir); nothing of it lands in HPCML_VAR_DIR.
    assert list((prefix / 'reports').glob('run-report-*.json'))
    assert not list(var.glob('reports/run-report-*.json'))


def test_stage_output_perflogdir_and_report_file_options(tmp_path, cache_dir):
    where = {name: tmp_path / name for name in ('st', 'out', 'pl')}
    report = tmp_path / 'report.json'
    proc = reframe(tmp_path, cache_dir, '-C', REPO / 'config/local.py',
                   '-c', REPO / 'checks/cosmoflow.py', *ONE_CASE, '-r',
                   '--stage', where['st'], '--output', where['out'],
                   '--perflogdir', where['pl'], '--report-file', report)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(where['out'].glob('local/cpu/python/*/rfm_job.out'))
    assert (where['st'] / 'local').is_dir()
    assert (where['pl'] / 'local/cpu/CosmoFlow.log').exists()
    assert report.exists()
    var = tmp_path / 'var'
    for name in ('stage', 'output', 'perflogs'):
        assert not (var / name).exists(), name
