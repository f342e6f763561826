"""The documentation stays true: README's quick start works from a fresh
copy, the commands README and the docs mark runnable run, their links
lead somewhere, and the generated pages cover every declaration.

A Markdown code block that follows ``<!-- runnable -->`` is run from the
repository root, line by line, each line a command that must exit 0;
``<!-- runnable: integration -->`` marks the slow ones (ReFrame's
listings and dry-runs). The site itself is built by ``make docs`` (in
``.ci/run``), with warnings as errors."""
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import BIN, REPO
from hpctestlib_ml import registry, settings

DOCS = REPO / 'docs'
PAGES = [REPO / 'README.md', *sorted(DOCS.rglob('*.md'))]
PAGES = [p for p in PAGES if '_build' not in p.parts]

_spec = importlib.util.spec_from_file_location(
    'hpcml_docs', DOCS / '_ext' / 'hpcml_docs.py')
hpcml_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hpcml_docs)

MARKER = re.compile(r'^<!-- runnable(?:: (?P<kind>[\w-]+))? -->\n'
                    r'```(?:sh|bash|console)\n(?P<body>.*?)^```$',
                    re.M | re.S)


def runnable_blocks(path):
    '''(kind, commands) of each block *path* marks runnable: kind is ''
    or ``integration``; commands are its lines, continuations joined.'''
    blocks = []
    for match in MARKER.finditer(path.read_text()):
        body = match['body'].replace('\\\n', ' ')
        commands = [line.strip() for line in body.splitlines()
                    if line.strip() and not line.lstrip().startswith('#')]
        blocks.append((match['kind'] or '', commands))
    return blocks


def block_params():
    params = []
    for path in PAGES:
        for i, (kind, commands) in enumerate(runnable_blocks(path)):
            marks = [pytest.mark.integration] if kind == 'integration' else []
            params.append(pytest.param(
                commands, marks=marks,
                id=f'{path.relative_to(REPO)}[{i}]'))
    return params


def test_marked_blocks_are_found():
    '''The marker's pattern finds the blocks the pages mark (a typo in a
    marker would make a block silently untested).'''
    for path in PAGES:
        markers = re.findall(r'^<!-- runnable', path.read_text(), re.M)
        assert len(markers) == len(runnable_blocks(path)), (
            f'{path.relative_to(REPO)}: a runnable marker is not directly '
            'above a ```sh block')
    assert sum(len(runnable_blocks(p)) for p in PAGES) >= 5


@pytest.mark.parametrize('commands', block_params())
def test_runnable_commands_run(commands, tmp_path, cache_dir):
    env = {**os.environ, 'HPCML_VAR_DIR': str(tmp_path / 'var'),
           'HPCML_CACHE_DIR': str(cache_dir),
           'PATH': f'{BIN}{os.pathsep}{os.environ["PATH"]}'}
    env.pop('RFM_CONFIG_FILES', None)
    for command in commands:
        # The pages name the project's .venv; the tests run in theirs.
        command = re.sub(r'(^|\s)\.venv/bin/', rf'\g<1>{BIN}/', command)
        proc = subprocess.run(['bash', '-c', command], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (
            f'{command!r} exited {proc.returncode}:\n{proc.stdout[-2000:]}'
            f'\n{proc.stderr[-2000:]}')


def quick_start():
    '''The commands of README's first code block.'''
    text = (REPO / 'README.md').read_text()
    block = re.search(r'^```sh\n(.*?)^```$', text, re.M | re.S)[1]
    return [line.split('#')[0].strip() for line in block.splitlines()
            if line.split('#')[0].strip()]


def test_readme_quick_start_works_from_a_fresh_copy(tmp_path):
    '''README's two commands, as make would run them from a copy of the
    tracked files (what a fresh clone has): a venv made with the extras,
    then the suite and the tests.'''
    assert quick_start() == ['make suite', 'make test']
    files = subprocess.run(['git', 'ls-files', '-z'], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout
    clone = tmp_path / 'clone'
    for name in filter(None, files.split('\0')):
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    proc = subprocess.run(['make', '-n', 'suite', 'test', 'docs'], cwd=clone,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    plan = proc.stdout
    assert 'python3 -m venv .venv' in plan
    assert "-e '.[pytorch,tensorflow,test,docs]'" in plan
    assert '.venv/bin/hpcml suite' in plan
    assert '.venv/bin/python -m pytest' in plan
    assert '.venv/bin/sphinx-build -W' in plan


LINK = re.compile(r'\]\(([^)\s#]+)(?:#[^)]*)?\)')


@pytest.mark.parametrize('path', PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_files(path):
    missing = [target for target in LINK.findall(path.read_text())
               if '://' not in target and not target.startswith('mailto:')
               and not (path.parent / target).exists()]
    assert not missing, f'{path.relative_to(REPO)} links to {missing}'


def test_every_workload_has_its_page():
    assert hpcml_docs.missing_pages(DOCS) == []


def test_a_workload_without_a_page_is_named(tmp_path):
    (tmp_path / 'workloads').mkdir()
    (tmp_path / 'workloads' / 'clip.md').write_text('# CLIP\n')
    missing = hpcml_docs.missing_pages(tmp_path)
    assert 'clip' not in missing and 'megatron' in missing


@pytest.mark.parametrize('kind', hpcml_docs.SETTING_KINDS)
def test_settings_page_lists_every_declared_setting(kind):
    text = '\n'.join(hpcml_docs.settings_rst(kind))
    declared = [row[1] for row in settings.rows() if row[0] == kind]
    assert declared
    for name in declared:
        assert f'``{name}``' in text


def test_settings_kinds_are_the_declared_ones():
    assert set(hpcml_docs.SETTING_KINDS) == set(settings.KINDS)


def test_unknown_kind_of_setting_is_refused():
    with pytest.raises(ValueError, match='unknown kind of setting'):
        hpcml_docs.settings_rst('extra')


def test_settings_text_is_shown_as_written():
    '''A declaration's words are not RST: HPCML_* or extras['x'] must not
    become markup (docutils would warn, and -W fail the build).'''
    assert hpcml_docs.plain("HPCML_* and extras['a_b']") == \
        "HPCML\\_\\* and extras\\['a\\_b'\\]"


def test_gpu_models_table_has_every_key_its_memory_and_note():
    '''Issue 40: the keys were listed only in constants.py; the settings
    page generates their table.'''
    from hpctestlib_ml import constants
    text = '\n'.join(hpcml_docs.gpu_models_rst())
    for key in constants.DEVICE_PEAK_FLOPS:
        assert f'* - ``{key}``' in text, key
    assert '40 or 80: set ``device_memory_gib``' in text
    assert 'one of the two compute dies (GCDs) of an MI250X' in text
    assert '``MI250X``' in text       # the product name of MI250X-GCD


def test_workloads_table_has_a_row_per_workload():
    text = '\n'.join(hpcml_docs.workloads_rst())
    for name in registry.registered():
        assert f':doc:`{name} </workloads/{name}>`' in text


@pytest.mark.parametrize('name', list(registry.registered()))
def test_workload_section_declares_sizes_class_and_references(name):
    text = '\n'.join(hpcml_docs.workload_rst(name))
    cls = hpcml_docs.test_class(registry.get(name))
    assert f'.. autoclass:: {cls.__module__}.{cls.__name__}' in text
    assert '   * - setting\n     - tiny\n     - benchmark' in text
    assert f'config/references/{name}.yaml' in text


def test_the_workloads_toctrees_list_the_registry():
    '''A new workload's page needs no list edited: the tables of contents
    of docs/workloads/index.md are the registry's, by kind.'''
    registered = registry.registered()
    assert hpcml_docs.pages_of_kind('workload') + hpcml_docs.pages_of_kind(
        'component') == [n for k in ('workload', 'component')
                         for n, w in registered.items() if w.kind == k]
    assert set(hpcml_docs.pages_of_kind('component')) == {
        n for n, w in registered.items() if not w.trains}
    with pytest.raises(ValueError, match='no workload of kind'):
        hpcml_docs.pages_of_kind('bogus')
    index = (REPO / 'docs' / 'workloads' / 'index.md').read_text()
    assert '{hpcml-workload-pages} workload' in index
    assert not any(f'\n{n}\n' in index for n in registered)
