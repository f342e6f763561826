"""A tenth workload touches no shared file: in a copy of the repository,
``hpcml new-workload tenth`` adds one from the template (the developer
guide's "Adding a workload" is these steps) and its declaration adds a
Python package and a published parameter count; ReFrame runs its check
through the suite's local configuration, the suite's own tests and every
list of workloads (the benches', the full-size tests', the docs' tables)
take it in, its runs log its package's version, and ``git status`` shows
new files only."""
import json
import os
import runpy
import shutil
import subprocess
import sys
from importlib import metadata

import pytest

from conftest import BIN, REPO
from perflog import read_perflog

NAME, CHECK = 'tenth', 'Tenth'

#: The package the tenth's declaration adds: a pip requirement no
#: workload declared (the suite's own PyYAML, installed wherever the
#: suite runs, so that its runs have a version to log), and the
#: distribution its runs log.
PACKAGE, DISTRIBUTION = 'PyYAML>=6', 'PyYAML'

#: The template's tiny model: ``depth`` + 1 linear layers of ``width``
#: with their biases (``templates/workload/src/template_workload``).
TINY = runpy.run_path(str(REPO / 'templates' / 'workload' / 'src' /
                          'template_workload' / 'sizes.py'))['SIZES']['tiny']
PARAMS = (TINY['depth'] + 1) * (TINY['width'] ** 2 + TINY['width'])

#: A source, as a declaration cites one.
SOURCE = 'https://example.org/tenth'

#: What the tenth's developer adds to its declaration (a new file): a
#: package its program imports and the count published for its tiny model,
#: with the forward FLOPs published with it.
FACTS = f'''
import dataclasses
WORKLOAD = dataclasses.replace(
    WORKLOAD, packages=({PACKAGE!r},),
    published={{'tiny': (model_info.Published(
        {PARAMS}, "the tenth's paper", {SOURCE!r},
        flops=forward_flops({TINY['width']}, {TINY['depth']})),)}})
'''


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
    '''The tenth workload, from the template, with :data:`FACTS` added to
    its declaration.'''
    proc = run(copy, sys.executable, '-m', 'hpctestlib_ml.cli',
               'new-workload', NAME)
    assert proc.returncode == 0, proc.stderr
    declaration = copy / 'hpctestlib_ml' / 'registry' / f'{NAME}.py'
    declaration.write_text(declaration.read_text() + FACTS)
    return proc.stdout


@pytest.mark.integration
def test_its_check_runs_through_the_suites_configuration(copy, added,
                                                         tmp_path, cache_dir):
    '''Over 30 s (about 35 s: its three cases through ReFrame): a new
    workload that passes every guard but fails in ReFrame fails here.'''
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
        # The package its declaration adds, logged beside the framework.
        assert f'{DISTRIBUTION}={metadata.version(DISTRIBUTION)}' in \
            row['framework_versions'].split(';')


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


FACTS_PICKED_UP = '''
import json, sys
sys.path[:0] = ['docs/_ext']
import hpcml_docs
from hpctestlib_ml import registry
print(json.dumps({'table': hpcml_docs.published_rst(),
                  'logged': registry.get(sys.argv[1]).logged_packages}))
'''


@pytest.mark.integration
def test_its_package_and_published_count_are_picked_up(copy, added):
    '''Issue 41: its declaration is the one home of what it publishes and
    imports. The fidelity page's table lists its count with its source,
    its runs are told to log its package (``HPCML_PROVENANCE_PACKAGES``,
    which ``src/provenance.py`` reads), ``hpcml model-info`` sets the
    count beside the model built, and ``tests/test_model_info.py`` holds
    the model built to it and its FLOPs to those published; no shared
    file is touched (``test_git_status_shows_new_files_only``). About
    10 to 20 s on 2 cores (two of its four Python processes import
    torch).'''
    proc = run(copy, sys.executable, '-c', FACTS_PICKED_UP, NAME)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    table = '\n'.join(found['table'])
    assert f':doc:`{NAME} </workloads/{NAME}>`' in table
    assert f'{PARAMS:,}' in table and SOURCE in table
    assert found['logged'] == [DISTRIBUTION]

    proc = run(copy, sys.executable, 'src/provenance.py',
               env={'HPCML_PROVENANCE_PACKAGES': ' '.join(found['logged'])})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)['versions'][DISTRIBUTION] == \
        metadata.version(DISTRIBUTION)

    proc = run(copy, sys.executable, '-m', 'hpctestlib_ml.cli', 'model-info',
               NAME, '--size', 'tiny', '--json')
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout)
    assert info['params'] == PARAMS
    assert [(p['params'], p['source']) for p in info['published_params']] \
        == [(PARAMS, SOURCE)]

    proc = run(copy, sys.executable, '-m', 'pytest', '-q', '-p',
               'no:cacheprovider', 'tests/test_model_info.py', '-k',
               f'{NAME} and published', timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert '2 passed' in proc.stdout


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
