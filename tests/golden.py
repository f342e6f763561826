"""Golden job scripts: what ``reframe --dry-run`` wrote, without what
differs between checkouts and runs, held against the files under
``tests/data/golden/`` (README.md there lists each with its sources).

A change to a job script is a reviewed diff: after an intended one,
rewrite the files with ``HPCML_UPDATE_GOLDEN=1`` (``make test
PYTEST_ARGS='tests/test_containers.py tests/test_site_configs.py'``)
and read ``git diff tests/data/golden``.
"""
import os
import re

from conftest import DATA, REPO
from hpctestlib_ml import image

GOLDEN = DATA / 'golden'


def normalized(script, var):
    '''*script* without what differs between checkouts and runs: the
    var directory (``$VAR``), the checkout (``$REPO``), the image's recipe
    tag (``<tag>``) and ReFrame's hash of a case (``<hash>``).'''
    script = script.replace(str(var), '$VAR').replace(str(REPO), '$REPO')
    script = script.replace(image.recipe_tag(), '<tag>')
    return re.sub(r'_[0-9a-f]{8}\b', '_<hash>', script)


def check_golden(name, text):
    '''*text* is the golden file *name*; with ``HPCML_UPDATE_GOLDEN`` set,
    it becomes it.'''
    path = GOLDEN / name
    if os.environ.get('HPCML_UPDATE_GOLDEN'):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), (
        f'{name} changed: if intended, HPCML_UPDATE_GOLDEN=1 and review '
        f'git diff tests/data/golden (tests/golden.py)')
