"""Where the suite keeps things (hpctestlib_ml.paths): run from any
directory, ``hpcml report`` and ``hpcml references`` read the suite's
var/, the repository's (where ``hpcml suite`` writes) or HPCML_VAR_DIR,
which, relative, means the directory the user runs in."""
import os
import shutil
import subprocess
import sys

from conftest import REPO
from perflog import suite_line, write_suite_perflog

CASE = 'tiny 1x1 per_task batch=4 fp32'


def suite_copy(tmp_path):
    '''The library and its config as a repository of the test's own: the
    real repository's var/ holds this machine's runs.'''
    repo = tmp_path / 'repo'
    skip = shutil.ignore_patterns('__pycache__')
    for part in ('hpctestlib_ml', 'config', 'src'):
        shutil.copytree(REPO / part, repo / part, ignore=skip)
    return repo


def history(var_dir, runs=5):
    '''*runs* passing CosmoFlow results on local:cpu in *var_dir*.'''
    lines = [suite_line(1.8e9 + 60 * i, 'CosmoFlow %scale=1_proc '
                        '%launch_mode=per_task', 'local:cpu',
                        {'workload': 'cosmoflow', 'resolved_size': 'tiny',
                         'reference_case': CASE},
                        {'samples_per_second': (100.0 + i, 'samples/s')})
             for i in range(runs)]
    write_suite_perflog(var_dir / 'perflogs' / 'local' / 'cpu' /
                        'CosmoFlow.log', lines, ['samples_per_second'])


def hpcml(repo, cwd, *args, **env):
    '''``hpcml ARGS`` of the library in *repo*, run in *cwd* as a shell
    there would run it (``PWD`` is *cwd*).'''
    cwd.mkdir(parents=True, exist_ok=True)
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith('HPCML_')}
    environ.update(PYTHONPATH=str(repo), PWD=str(cwd), **env)
    return subprocess.run(
        [sys.executable, '-c', 'import sys; from hpctestlib_ml.cli import '
         'main; sys.exit(main())', *map(str, args)], cwd=cwd, env=environ,
        capture_output=True, text=True, timeout=300)


def test_report_and_references_read_the_suites_var_from_anywhere(tmp_path):
    repo = suite_copy(tmp_path)
    history(repo / 'var')
    elsewhere = tmp_path / 'elsewhere'
    out = hpcml(repo, elsewhere, 'report')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('5 runs selected of 5 read from 1 files')
    out = hpcml(repo, elsewhere, 'references', '--system', 'local:cpu')
    assert out.returncode == 0, out.stderr
    assert f"CosmoFlow local:cpu '{CASE}': 5 runs" in out.stdout


def test_a_relative_var_dir_is_where_the_user_runs(tmp_path):
    repo = suite_copy(tmp_path)
    elsewhere = tmp_path / 'elsewhere'
    history(elsewhere / 'myvar', runs=3)
    out = hpcml(repo, elsewhere, 'report', HPCML_VAR_DIR='myvar')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('3 runs selected of 3 read from 1 files')
    out = hpcml(repo, elsewhere, 'report', '--save-baseline', 'here',
                HPCML_VAR_DIR='myvar')
    assert (elsewhere / 'myvar' / 'baselines' / 'here.json').is_file()
