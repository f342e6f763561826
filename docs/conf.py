"""Sphinx configuration of hpcml's documentation (``make docs``).

The pages are MyST Markdown (moved from the README) and reStructuredText;
the library's docstrings are rendered by autodoc, as ReFrame renders its
test library (reframe-hpc/reframe ``docs/hpctestlib.rst``); the settings,
the workloads' facts and the CLI are generated at build time
(``_ext/hpcml_docs.py``, sphinx-argparse). Offline: no intersphinx.
"""
import pathlib
import re
import sys

DOCS = pathlib.Path(__file__).resolve().parent
# The checkout's library (autodoc, the generated pages) and extension.
sys.path[:0] = [str(DOCS.parent), str(DOCS / '_ext')]

project = 'hpcml'
author = 'the hpcml developers'
copyright = 'the hpcml developers'
# The checkout's version (pyproject.toml's, which CHANGELOG.md's newest
# entry names), not the installed package's, which is the version of the
# last make setup.
release = re.search(r'^version = "([^"]+)"$', (DOCS.parent / 'pyproject.toml')
                    .read_text(), re.M)[1]
version = release

extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.viewcode',
    'myst_parser',
    'sphinxarg.ext',
    'hpcml_docs',
]
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build', 'Thumbs.db', '.DS_Store']

# No typographic replacement: docutils' smart quotes made ``--memory`` an
# en dash and quotes curly in help texts and prose outside code, so that a
# command copied from the page failed.
smartquotes = False

# Links to headings of other pages ([text](page.md#a-heading)).
myst_heading_anchors = 3

autodoc_member_order = 'bysource'
# Signatures show defaults as the source writes them (``environ=None``,
# ``which=shutil.which``), not as repr() of the object at build time: a
# default evaluated at import (a mapping, a path) printed the build
# machine's values into the published pages.
autodoc_preserve_defaults = True
autodoc_default_options = {'show-inheritance': True}
# ReFrame's test classes are documented where they are defined.
autodoc_inherit_docstrings = False

# make docs builds nitpicky (-n): every cross-reference must resolve, but
# for these, declared here on purpose.
# - ReFrame's and Python's own names: the build is offline (no
#   intersphinx), so nothing here can resolve them.
nitpick_ignore = [
    ('py:class', 'reframe.core.pipeline.RegressionTestPlugin'),
    ('py:class', 'reframe.core.pipeline.RunOnlyRegressionTest'),
    ('py:class', 'reframe.core.exceptions.ConfigError'),
    ('py:class', 'List[str]'),
    ('py:class', 'types.ModuleType'),
    ('py:obj', 'True'),
    ('py:obj', 'False'),
]
# - The library's internal modules, which the reference does not render
#   (the library page renders what a check or a site configuration uses):
#   docstrings name them for the reader of the source, and the page shows
#   the name as code. A name in a rendered module must resolve.
INTERNAL_MODULES = [
    'constants', 'sizes', 'layout', 'launch', 'peaks', 'precisions',
    'memory_estimate', 'flops', 'state_size', 'container', 'container_launch',
    'inputs', 'device_check', 'energy', 'provenance', 'errors', 'sessions',
    'var_full', 'triage', 'parsers', 'history_refs', 'report',
    'registry.megatron', 'answers',
]
nitpick_ignore_regex = [
    (r'py:(mod|func|data|class|attr|meth)',
     r'hpctestlib_ml\.({})(\..+)?'.format('|'.join(
         m.replace('.', r'\.') for m in INTERNAL_MODULES))),
]

html_theme = 'furo'
html_title = f'hpcml {release}'.strip()
html_static_path = []
html_show_sourcelink = False
