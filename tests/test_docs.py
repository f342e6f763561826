"""The documentation stays true: README's quick start works from a fresh
copy, the commands README and the docs mark runnable run, their links
lead somewhere, and the generated pages cover every declaration.

A Markdown code block that follows ``<!-- runnable -->`` is run from the
repository root: a ``sh`` block line by line, each line a command that
must exit 0 (and a listing or dry-run must select something); a
``console`` block's ``$ `` lines are its commands and the lines after each
what it must print (in order; ``...`` stands for anything), whatever its
exit status. ``<!-- runnable: integration -->`` marks the slow ones
(ReFrame's listings and dry-runs). A command of a guide's code block that
can run here (a listing, a dry-run, a help) must be in such a block. The
site itself is built by ``make docs`` (in ``.ci/run``), with warnings as
errors."""
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
                    r'```(?P<lang>sh|bash|console)\n(?P<body>.*?)^```$',
                    re.M | re.S)


def steps_of(lang, body):
    '''[(command, [the lines it must print])] of a block's *body*: a
    ``console`` block's ``$ `` lines and the output shown after each, or
    each line of a shell block (comments left out), continuations
    joined.'''
    body = body.replace('\\\n', ' ')
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if lang != 'console':
        return [(line, []) for line in lines if not line.startswith('#')]
    steps = []
    for line in lines:
        if line.startswith('$ '):
            steps.append((line[2:], []))
        else:
            assert steps, f'output before a command: {line!r}'
            steps[-1][1].append(line)
    return steps


def runnable_blocks(path):
    '''(kind, lang, steps) of each block *path* marks runnable: kind is
    '' or ``integration``; steps are :func:`steps_of` its body.'''
    return [(match['kind'] or '', match['lang'],
             steps_of(match['lang'], match['body']))
            for match in MARKER.finditer(path.read_text())]


def block_params():
    params = []
    for path in PAGES:
        for i, (kind, lang, steps) in enumerate(runnable_blocks(path)):
            marks = [pytest.mark.integration] if kind == 'integration' else []
            params.append(pytest.param(
                lang, steps, marks=marks,
                id=f'{path.relative_to(REPO)}[{i}]'))
    return params


ANSI = re.compile(r'\x1b\[[0-9;]*m')


def shows(output, expected):
    '''Whether *output* holds the lines *expected*, in order, each a
    whole line (surrounding blanks aside) where ``...`` stands for
    anything; a line of ``...`` alone for any lines.'''
    lines = [line.strip() for line in ANSI.sub('', output).splitlines()]
    at = 0
    for want in expected:
        if want == '...':
            continue
        pattern = re.compile('.*'.join(map(re.escape, want.split('...'))))
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return False
        at += 1
    return True


def test_console_output_is_matched_line_by_line():
    out = 'a\nFound 3 check(s)\n  total    74.32 GiB\nz\n'
    assert shows(out, ['...', 'Found 3 check(s)', 'total    74.32 GiB'])
    assert shows(out, ['Found ... check(s)', '...', 'z'])
    assert not shows(out, ['Found 0 check(s)'])
    assert not shows(out, ['total    74.32 GiB', 'Found 3 check(s)'])
    assert not shows(out, ['Found 3'])             # whole lines


def test_marked_blocks_are_found():
    '''The marker's pattern finds the blocks the pages mark (a typo in a
    marker would make a block silently untested).'''
    for path in PAGES:
        markers = re.findall(r'^\s*<!-- runnable', path.read_text(), re.M)
        assert len(markers) == len(runnable_blocks(path)), (
            f'{path.relative_to(REPO)}: a runnable marker is not directly '
            'above a ```sh or ```console block at the start of a line')
    assert sum(len(runnable_blocks(p)) for p in PAGES) >= 5


@pytest.mark.parametrize('lang, steps', block_params())
def test_runnable_commands_run(lang, steps, tmp_path, cache_dir):
    env = {**os.environ, 'HPCML_VAR_DIR': str(tmp_path / 'var'),
           'HPCML_CACHE_DIR': str(cache_dir),
           'PATH': f'{BIN}{os.pathsep}{os.environ["PATH"]}'}
    env.pop('RFM_CONFIG_FILES', None)
    for command, expected in steps:
        # The pages name the project's .venv; the tests run in theirs.
        command = re.sub(r'(^|\s)\.venv/bin/', rf'\g<1>{BIN}/', command)
        proc = subprocess.run(['bash', '-c', command], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        said = f'{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}'
        if lang == 'console':
            assert shows(proc.stdout + proc.stderr, expected), (
                f'{command!r} (exit {proc.returncode}) did not print what '
                f'the page shows, {expected}:\n{said}')
            continue
        assert proc.returncode == 0, (
            f'{command!r} exited {proc.returncode}:\n{said}')
        # A listing or dry-run that selects nothing exits 0 too: the page's
        # selection would be wrong (-n 'MegatronGPT%model_size=13B' was).
        assert not re.search(r'^Found 0 check\(s\)', proc.stdout, re.M), (
            f'{command!r} selects no test case:\n{proc.stdout[-2000:]}')


#: Any fenced code block, indented or not.
CODE = re.compile(r'^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)\n(?P<body>.*?)'
                  r'^(?P=indent)```$', re.M | re.S)
#: The marker of a block that cannot run here, with its reason.
NOT_HERE = re.compile(r'<!-- not runnable here: \S.* -->\n[ \t]*$')
#: What runs here whatever the machine: a listing, a dry-run, a help.
LISTS_OR_HELPS = re.compile(r'(^|\s)(-l|--dry-run|--help|--version|--plan)'
                            r'(\s|$)')
#: hpcml's tools that read the files they are given.
FILE_TOOLS = ('extract', 'triage', 'compliance', 'changes')


def can_run_here(command):
    '''Whether *command* needs nothing this machine lacks: it lists,
    dry-runs or prints a help (ReFrame queues nothing), or it is one of
    hpcml's tools on files of the repository.'''
    if LISTS_OR_HELPS.search(command):
        return True
    words = [w for w in command.split() if '=' not in w or w.startswith('-')]
    if len(words) > 2 and words[0].endswith('hpcml') and \
            words[1] in FILE_TOOLS:
        paths = [w for w in words[2:] if '/' in w]
        return bool(paths) and all((REPO / w).exists() for w in paths)
    return False


def guide_commands(path):
    '''(command, marked) of every shell or console command in the code
    blocks of *path*: marked where its block is run by
    :func:`test_runnable_commands_run` or says why it cannot be.'''
    text = path.read_text()
    found = []
    for match in CODE.finditer(text):
        if match['lang'] not in ('sh', 'bash', 'console'):
            continue
        before = text[:match.start()]
        marked = bool(re.search(r'<!-- runnable(: [\w-]+)? -->\n[ \t]*$',
                                before) or NOT_HERE.search(before))
        found += [(command, marked) for command, _ in
                  steps_of(match['lang'], match['body'])]
    return found


def test_every_command_that_can_run_here_is_run():
    '''A command in a guide that lists, dry-runs, prints a help or reads
    the repository's own files is run by the tests (in a runnable block),
    so that a wrong selection or a renamed option fails here, not for a
    reader; a block that cannot run here says why (``<!-- not runnable
    here: REASON -->``).'''
    unrun = [f'{path.relative_to(REPO)}: {command}' for path in PAGES
             for command, marked in guide_commands(path)
             if not marked and can_run_here(command)]
    assert not unrun, unrun
    every = [c for path in PAGES for c, marked in guide_commands(path)
             if marked and can_run_here(c)]
    assert len(every) >= 10


def test_what_can_run_here_is_told_from_what_cannot():
    assert can_run_here(".venv/bin/hpcml suite -n '^MMoCLIP%' -l")
    assert can_run_here('HPCML_ACCOUNT=x reframe -C c.py -c checks '
                        '--dry-run')
    assert can_run_here('.venv/bin/hpcml triage tests/data/triage/public/'
                        'hafs101_srun_oom_kill_task4.log')
    assert not can_run_here('hpcml triage slurm-8.out')
    assert not can_run_here('.venv/bin/reframe -C config/slurm.py -c '
                            'checks -r --mode smoke')
    assert not can_run_here('hpcml references --system mysite:gpu --write')


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
    assert '.venv/bin/sphinx-build -n -W' in plan     # nitpicky, as CI


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


def test_the_fidelity_table_is_every_published_count():
    '''Issue 41: the fidelity page's table of published counts was a
    hand copy of the tests' numbers (torchvision's ResNet-50 in neither);
    its rows are the declarations', each with its source.'''
    text = '\n'.join(hpcml_docs.published_rst())
    counts = [(name, count) for name, w in registry.registered().items()
              for counts in w.published.values() for count in counts]
    assert len(counts) == text.count(':doc:`')
    for name, count in counts:
        assert f':doc:`{name} </workloads/{name}>`' in text
        assert f'     - {count.params:,}\n' in text
        assert count.source in text
    assert '25,557,032' in text and '4.089 G, a multiply-add counted once' \
        in text
    fidelity = (REPO / 'docs' / 'guide' / 'fidelity.md').read_text()
    assert '{hpcml-published}' in fidelity
    assert not any(f'{count.params:,}' in fidelity for _, count in counts)


#: A count of the workloads, written by hand ("Nine training workloads").
COUNTED = re.compile(r'\b(\d+|one|two|three|four|five|six|seven|eight|nine|'
                     r'ten|eleven|twelve|thirteen|fourteen|fifteen)\s+'
                     r'(training\s+workloads|component\s+benchmarks)\b',
                     re.IGNORECASE)


@pytest.mark.parametrize('path', PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_counts_the_workloads_by_hand(path):
    '''Issue 41: README and the workloads page said "Nine training
    workloads" and listed them by hand, stale the day a tenth came from
    the template (which touches no shared file); the generated tables
    list the registry's.'''
    counted = [m.group(0) for m in COUNTED.finditer(path.read_text())]
    assert not counted, counted


def test_the_front_page_lists_no_training_workload_by_hand():
    '''README links the workloads page, which lists the registry's, and
    no training workload's own page: a hand list misses the next.'''
    readme = (REPO / 'README.md').read_text()
    assert '(docs/workloads/index.md)' in readme
    listed = [name for name, w in registry.registered().items()
              if w.trains and f'(docs/workloads/{name}.md)' in readme]
    assert not listed, listed


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


def test_the_numbers_pages_state_are_the_configurations():
    '''Statements the review found stale: the cluster page's noise (40 %)
    against its example file's (30), the regression page's sample failure
    (a floor of 30 % of local:cpu, which declares 50), config/slurm.py's
    list of GPU models (5 of the peak table's keys missing).'''
    from hpctestlib_ml.constants import DEVICE_PEAK_FLOPS

    def number(pattern, path):
        found = re.findall(pattern, (REPO / path).read_text(), re.S)
        assert len(found) == 1, (path, pattern, found)
        return int(found[0])

    cluster = number(r'how far figures move from night to night \| (\d+) %',
                     'docs/guide/cluster.md')
    assert cluster == number(r"'reference_noise_pct': (\d+)",
                             'docs/examples/site_config.py')
    assert cluster == number(r'export HPCML_REFERENCE_NOISE_PCT=(\d+)',
                             'tests/slurm/cluster.sh')
    local = number(r'\nCPU_NOISE_PCT = (\d+)\n', 'config/local.py')
    assert local == number(r"the site's floor (\d+) %\s+\(extras "
                           r"\['reference_noise_pct'\] of local:cpu\)",
                           'docs/guide/regression.md')
    assert local == number(r"partition's noise floor for references is "
                           r'(\d+) %', 'docs/guide/getting_started.md')
    doc = (REPO / 'config' / 'slurm.py').read_text().split('"""')[1]
    # No hand list of the keys to go stale: the generated table.
    said = re.search(r'HPCML_GPU_MODEL (.*?)\n    HPCML_', doc, re.S)[1]
    assert 'a key of the GPU model table' in ' '.join(said.split())
    assert not set(re.findall(r'[\w-]+', said)) & set(DEVICE_PEAK_FLOPS)


def project_version():
    return re.search(r'^version = "([^"]+)"$',
                     (REPO / 'pyproject.toml').read_text(), re.M)[1]


def test_the_changelogs_newest_entry_is_the_version():
    '''CHANGELOG.md's entries are headed "## VERSION (DATE)", newest
    first, "(unreleased)" for a .devN; the newest names pyproject.toml's
    version, so that the version moves with the changelog.'''
    text = (REPO / 'CHANGELOG.md').read_text()
    entries = re.findall(r'^## (\S+) \((unreleased|\d{4}-\d{2}-\d{2})\)$',
                         text, re.M)
    assert len(entries) >= 2
    assert re.findall(r'^## .*$', text, re.M)[0] == (
        f'## {entries[0][0]} ({entries[0][1]})'), 'an entry is misheaded'
    version, when = entries[0]
    assert version == project_version()
    assert (when == 'unreleased') == ('.dev' in version)
    dated = [w for _, w in entries if w != 'unreleased']
    assert dated == sorted(dated, reverse=True)
    assert '{include} ../CHANGELOG.md' in (DOCS / 'changelog.md').read_text()
