"""A tenth workload touches no shared file: in a copy of the repository,
``hpcml new-workload tenth`` adds one from the template (the developer
guide's "Adding a workload" is these steps), ReFrame runs its check
through the suite's local configuration, the suite's own tests and every
list of workloads (the benches', the full-size tests') take it in, and
``git status`` shows new files only."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BIN, REPO
from perflog import read_perflog

NAME, CHECK = 'tenth', 'Tenth'


def git(*args, cwd):
    return subprocess.run(
        ['git', '-c', 'user.name=hpcml', '-c', 'user.email=hpcml@localhost',
         *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope='module')
def copy(tmp_path_factory):
    '''The repository's files (git ls-files: no .venv, no var/) in a
    directory of their own, committed there.'''
    root = tmp_path_factory.mktemp('copy') / 'repo'
    listed = git('ls-files', '--cached', '--others', '--exclude-standard',
                 '-z', cwd=REPO).split('\0')
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    git('init', '-q', cwd=root)
    git('add', '-A', cwd=root)
    git('commit', '-q', '-m', 'copy', cwd=root)
    return root


def run(copy, *args, timeout=900, env=None):
    '''A command of the worktree's .venv in the copy, which the copy's
    hpctestlib_ml serves (PYTHONPATH, cwd).'''
    full = {**os.environ, 'PYTHONPATH': str(copy), **(env or {})}
    full.pop('RFM_CONFIG_FILES', None)
    return subprocess.run([str(a) for a in args], cwd=copy, env=full,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope='module')
def added(copy):
    '''The tenth workload, from the template.'''
    proc = run(copy, sys.executable, '-m', 'hpctestlib_ml.cli',
               'new-workload', NAME)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.integration
def test_its_check_runs_through_the_suites_configuration(copy, added,
                                                         tmp_path, cache_dir):
    var = tmp_path / 'var'
    proc = run(copy, BIN / 'reframe', '-C', 'config/local.py', '-c',
               'checks', '-r', '-n', f'^{CHECK}%',
               env={'HPCML_VAR_DIR': str(var),
                    'HPCML_CACHE_DIR': str(cache_dir)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    rows = read_perflog(var / 'perflogs' / 'local' / 'cpu' / f'{CHECK}.log')
    assert len(rows) == 3          # 1 rank per task and torchrun, 2 ranks
    for row in rows:
        assert row['result'] == 'pass' and row['workload'] == NAME
        assert float(row['samples_per_second_value']) > 0
        assert float(row['mfu_value']) > 0
        assert row['data_share_value'] not in ('', 'None')
        assert row['device_ran'].startswith('cpu ')


@pytest.mark.integration
def test_the_suites_tests_take_it_in(copy, added):
    '''The tests that hold every workload to the registry's contract (the
    names agree across layers, the Summary, the settings, the layers), and
    its own.'''
    proc = run(copy, sys.executable, '-m', 'pytest', '-q', '-x', '-p',
               'no:cacheprovider', '-m', 'not integration',
               'tests/test_workloads.py', 'tests/test_check_docs.py',
               'tests/test_layers.py', f'tests/test_{NAME}.py',
               'tests/test_settings.py::'
               'test_every_variable_of_every_check_is_declared_or_recorded',
               timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert f'{NAME}' in run(copy, sys.executable, '-m', 'pytest', '-q',
                            '--collect-only', '-p', 'no:cacheprovider',
                            'tests/test_workloads.py').stdout


LISTS = '''
import sys
sys.path[:0] = ['bench', 'tests', 'docs/_ext']
import harness_bench, hpcml_docs, test_fullsize
from hpctestlib_ml import registry
print(sorted(harness_bench.CHECKS), sorted(test_fullsize.CASES),
      sorted(registry.registered()))
print(hpcml_docs.pages_of_kind('workload'), hpcml_docs.missing_pages('docs'))
'''


@pytest.mark.integration
def test_every_list_of_workloads_has_it(copy, added):
    '''The benches', the full-size tests', the registry's, and the docs'
    table of contents (its page exists: none is missing).'''
    proc = run(copy, sys.executable, '-c', LISTS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lists, pages = proc.stdout.splitlines()[-2:]
    assert lists.count(CHECK) == 2 and f"'{NAME}'" in lists
    assert f"'{NAME}'" in pages and pages.endswith(' []')


@pytest.mark.integration
def test_git_status_shows_new_files_only(copy, added, tmp_path):
    '''Nothing shared was touched: every path git reports is a new one,
    and they are the template's, renamed.'''
    status = git('status', '--porcelain', '--untracked-files=all', cwd=copy)
    lines = status.splitlines()
    assert lines and all(line.startswith('?? ') for line in lines), status
    new = sorted(line[3:] for line in lines)
    template = copy / 'templates' / 'workload'
    assert new == sorted(
        str(p.relative_to(template)).replace('template_workload', NAME)
        for p in template.rglob('*') if p.is_file() and
        '__pycache__' not in p.parts)


def test_the_templates_names_are_replaced(tmp_path):
    from hpctestlib_ml.commands import new_workload
    files = new_workload.plan(NAME, CHECK, root=tmp_path)
    assert len(files) >= 9
    for template, new, text in files:
        assert NAME in str(new.relative_to(tmp_path)), new
        assert 'template_workload' not in text and \
            'TemplateWorkload' not in text, new
    assert {str(new.relative_to(tmp_path)) for _, new, _ in files} >= {
        f'src/{NAME}/__main__.py', f'hpctestlib_ml/registry/{NAME}.py',
        f'hpctestlib_ml/workloads/{NAME}.py', f'checks/{NAME}.py',
        f'config/references/{NAME}.yaml', f'tests/test_{NAME}.py',
        f'docs/workloads/{NAME}.md'}


@pytest.mark.parametrize('name, why', [
    ('cosmoflow', 'exist already: choose another name'),
    ('json', 'is a module on the Python path already'),
    ('Tenth', 'is no workload name'),
    # Second round, row 97: 'class' met every rule the message gave.
    ('class', "'class' is a Python keyword, which no module can be named"),
    # Row 100: a traceback (File name too long).
    ('v' * 252, 'is 252 characters long'),
])
def test_a_name_that_cannot_be_is_refused_and_nothing_written(name, why,
                                                             check=None):
    from hpctestlib_ml import cli
    before = git('status', '--porcelain', '--untracked-files=all', cwd=REPO)
    proc = subprocess.run([sys.executable, '-m', 'hpctestlib_ml.cli',
                           'new-workload', name,
                           *(['--check', check] if check else [])], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr
    assert proc.stderr.startswith('hpcml new-workload: error: ')
    assert len(proc.stderr.strip().splitlines()) == 1
    assert git('status', '--porcelain', '--untracked-files=all',
               cwd=REPO) == before
    assert 'new-workload' in cli.COMMANDS



def test_a_check_class_that_exists_is_refused():
    """Second round, row 99: --check CosmoFlow wrote ten files, and the
    template's MLP then ran, and was logged, as CosmoFlow."""
    test_a_name_that_cannot_be_is_refused_and_nothing_written(
        'mycosmo', 'a check class CosmoFlow exists already '
        '(checks/cosmoflow.py)', check='CosmoFlow')
