"""What the published site says is what a reader may copy, and nothing of
the machine that built it: the reference pages built from the real
``docs/conf.py`` (a small site of the CLI, settings and fidelity pages
and one library signature, about 4 s), and the library's defaults read from the
source."""
import ast
import html
import os
import re
import subprocess

import pytest

from conftest import BIN, REPO

DOCS = REPO / 'docs'

#: The pages copied into the small site, as the real site has them.
PAGES = {'cli.md': DOCS / 'reference' / 'cli.md',
         'settings.md': DOCS / 'reference' / 'settings.md',
         'fidelity.md': DOCS / 'guide' / 'fidelity.md'}

SIGNATURE = '''Signature
=========

.. autofunction:: hpctestlib_ml.siteconfig.local_container_platform
'''


def text_of(path):
    '''The visible text of an HTML page.'''
    return html.unescape(re.sub(r'<[^>]+>', '', path.read_text()))


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    '''A small site built with the real conf.py (``sphinx-build -c
    docs``): the pages of :data:`PAGES` and :data:`SIGNATURE` (the
    fidelity page's links to pages left out are warnings here); its output
    and doctree directories.'''
    root = tmp_path_factory.mktemp('site')
    src = root / 'src'
    src.mkdir()
    for name, page in PAGES.items():
        (src / name).write_text(page.read_text())
    (src / 'signature.rst').write_text(SIGNATURE)
    (src / 'index.rst').write_text(
        'Site\n====\n\n.. toctree::\n\n   cli\n   settings\n   fidelity\n'
        '   signature\n')
    proc = subprocess.run(
        [str(BIN / 'sphinx-build'), '-q', '-b', 'html', '-c', str(DOCS),
         '-d', str(root / 'doctrees'), str(src), str(root / 'html')],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def test_a_signature_shows_no_value_of_the_build_machine(site):
    '''local_container_platform's environ printed the whole os.environ of
    whoever ran make docs (CI's secrets too).'''
    text = text_of(site / 'html' / 'signature.html')
    assert 'local_container_platform(which=shutil.which' in text
    assert 'environ=None' in text
    assert 'environ(' not in text
    for name in ('HOME', 'PATH'):
        if os.environ.get(name):
            assert os.environ[name] not in text


def environ_defaults(path):
    '''The functions of *path* with a default that is the process's
    environment (``os.environ``, evaluated when the module is imported).'''
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for default in [*args.defaults, *args.kw_defaults]:
                if default is not None and 'environ' in ast.unparse(
                        default).split('.')[-1:]:
                    found.append(f'{path.relative_to(REPO)}:{node.lineno} '
                                 f'{node.name}')
    return found


def test_no_default_is_the_process_environment():
    '''A default of os.environ is the build machine's environment in any
    rendering of the signature, and the importing process's, not the
    caller's, at run time: None, read when called.'''
    found = [hit for path in sorted((REPO / 'hpctestlib_ml').rglob('*.py'))
             for hit in environ_defaults(path)]
    assert not found, found


def test_the_cli_page_shows_no_path_of_the_build_checkout(site):
    '''--prefix's default was computed when the parser was built: the
    building checkout's absolute path, shown as the default.'''
    text = text_of(site / 'html' / 'cli.html')
    assert '--prefix' in text
    assert str(REPO) not in text


def test_without_prefix_the_commands_read_the_suites_var():
    from hpctestlib_ml import cli, paths
    from hpctestlib_ml.commands.report import with_prefix
    for command in ('report', 'references'):
        args = cli.parser().parse_args([command, '--system', 'local'])
        assert args.prefix is None
        assert with_prefix(args).prefix == paths.VAR_DIR
        args = cli.parser().parse_args([command, '--system', 'local',
                                        '--prefix', 'elsewhere'])
        assert with_prefix(args).prefix == 'elsewhere'


@pytest.mark.parametrize('page, option', [('cli.html', '--memory'),
                                          ('settings.html', '--size')])
def test_options_and_quotes_are_printed_as_typed(site, page, option):
    '''Smart quotes made ``--memory`` ``–memory`` (an en dash) and quotes
    curly in help texts and the settings' words: copied, they fail.'''
    text = text_of(site / 'html' / page)
    assert option in text
    typographic = sorted({c for c in text if c in '–—‘’“”…'})
    assert not typographic, [
        text[max(0, i - 30):i + 20] for i, c in enumerate(text)
        if c in typographic][:5]


def test_generated_pages_are_rebuilt_when_their_sources_change(site):
    '''make docs left the CLI page stale after a help text changed:
    Sphinx rebuilds a page when a file it noted as a dependency is newer,
    and the CLI page noted none.'''
    import pickle
    with open(site / 'doctrees' / 'environment.pickle', 'rb') as fp:
        dependencies = pickle.load(fp).dependencies
    library = REPO / 'hpctestlib_ml'
    assert {str(library / 'cli.py'),
            str(library / 'commands' / 'report.py'),
            str(library / 'report' / 'nodes.py')} <= dependencies['cli']
    assert {str(library / 'settings.py'),
            str(library / 'registry' / 'megatron' / '__init__.py')
            } <= dependencies['settings']
    # Issue 41: the table of published counts, from the declarations.
    assert {str(library / 'model_info.py'),
            str(library / 'registry' / 'bert.py'),
            str(library / 'registry' / 'megatron' / 'models.py')
            } <= dependencies['fidelity']


def conf():
    '''docs/conf.py's settings, as Sphinx reads them.'''
    namespace = {'__file__': str(DOCS / 'conf.py')}
    exec(compile((DOCS / 'conf.py').read_text(), 'conf.py', 'exec'),
         namespace)
    return namespace


def test_the_nitpicky_build_ignores_only_modules_it_does_not_render():
    '''make docs is nitpicky (-n -W); docs/conf.py names the library's
    modules whose references it lets stand unresolved. Each must exist,
    and none may be one the reference renders, where such an ignore
    would hide a misspelt name.'''
    import importlib
    ignored = conf()['INTERNAL_MODULES']
    for name in ignored:
        importlib.import_module(f'hpctestlib_ml.{name}')
    rendered = set(re.findall(r'^\.\. auto(?:module|class):: hpctestlib_ml\.'
                              r'([\w.]+)', (DOCS / 'reference' /
                                            'library.rst').read_text(), re.M))
    assert rendered
    hidden = sorted(r for r in rendered for name in ignored
                    if r == name or r.startswith(name + '.'))
    assert not hidden, f'rendered, yet ignored by nitpick_ignore_regex: {hidden}'


def test_the_site_shows_the_checkouts_version():
    '''The site's title was the installed package's version (that of the
    last make setup); it is pyproject.toml's, which the changelog names.'''
    version = re.search(r'^version = "([^"]+)"$',
                        (REPO / 'pyproject.toml').read_text(), re.M)[1]
    assert conf()['release'] == version
