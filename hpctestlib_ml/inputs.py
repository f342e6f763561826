"""Whether a case's input files are where its settings say: found at
setup, before a job is written, where ReFrame's machine sees the path;
else the program finds it at the job's start, in the same words.

A missing input is ``filesystem`` ("missing data" in the triage table of
docs/guide/regression.md: the data are not where the ``-S`` or the site
configuration says), at setup as at the
job's start, where the program says ``No such file or directory:
'PATH'`` (``src/input_paths.py``, whose :func:`missing` this module
uses), which :mod:`hpctestlib_ml.triage` files under ``filesystem``. A
value that is no path at all (``-S data=synthetc``: relative, where the
job runs in its stage directory) is ``bad_input``.

What ReFrame's machine sees: everything, on the local scheduler; on a
batch scheduler, a path whose parent directory exists here and is not
node-local (``/tmp``: the compute node's own), since the cluster's shared
file systems are mounted on its login nodes too. A path with a shell
variable (``$SCRATCH``) is the job's to expand and check.

Pure: the standard library only.
"""
import dataclasses
import functools
import importlib.util
import os

from hpctestlib_ml.paths import SRC_DIR

#: Directories each node has its own of: a path there may exist on the
#: compute node only.
NODE_LOCAL = ('/tmp', '/var/tmp', '/dev/shm')


@functools.cache
def _programs_check():
    '''``src/input_paths.py``, loaded by its path (the library needs no
    ``src`` on ``sys.path``).'''
    spec = importlib.util.spec_from_file_location(
        '_hpcml_input_paths', SRC_DIR / 'input_paths.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass(frozen=True)
class Input:
    '''One input path of a case.'''
    #: Where it was set: ``-S data`` or ``extras['cosmoflow_data']``.
    source: str
    #: The path, as set.
    path: str
    #: ``dir``, ``file`` or ``prefix`` (``src/input_paths.py``'s KINDS).
    kind: str
    #: Files a directory must hold (``pretrain_gpt.py`` of a checkout).
    holds: tuple = ()
    #: What may stand in place of a path (``synthetic``), for the
    #: closest word to a typo.
    words: tuple = ()

    @property
    def from_site(self):
        return self.source.startswith('extras')


def visible_here(path, local):
    '''Whether ReFrame's machine sees *path* as the job will (see the
    module's docstring).'''
    if '$' in path or path.startswith('~'):
        return False
    if local:
        return True
    parent = os.path.dirname(os.path.normpath(path))
    if any(parent == d or parent.startswith(d + os.sep) for d in NODE_LOCAL):
        return False
    return os.path.isdir(parent)


def missing(item):
    '''The path of *item* that is not there (the input, or a file it
    must hold), or None: the programs' own check.'''
    return _programs_check().missing(item.path, item.kind, item.holds)


def problem(item, local, where=''):
    '''``(category, why)`` where the job cannot read *item* (one line),
    or None where it can or that cannot be told from here. *where*: the
    site configuration, for a site's input.'''
    from hpctestlib_ml.settings import closest
    path = item.path
    fix = (f'fix it in {where or "the site configuration"}, or put the '
           f'data there' if item.from_site else f'fix {item.source}')
    if not os.path.isabs(path) and not path.startswith(('$', '~')):
        what = (' nor '.join([*(f"'{w}'" for w in item.words),
                              'an absolute path'])
                if item.words else 'an absolute path')
        return 'bad_input', (
            f'{item.source} {path!r} is {"neither " if item.words else "not "}'
            f'{what} (the job runs in its stage directory)'
            f'{closest(path, item.words)}: {fix}')
    if not visible_here(path, local):
        return None
    gone = missing(item)
    if gone is None:
        return None
    what = {'dir': 'directory', 'file': 'file',
            'prefix': 'indexed dataset (.bin and .idx)'}[item.kind]
    return 'filesystem', (f"{item.source} {path}: No such file or "
                          f"directory: '{gone}' (the {what} the job reads)"
                          f': {fix}')
