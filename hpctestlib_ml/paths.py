"""Where the suite keeps things, whatever the current directory.

Every place the suite reads or writes is named here once: the repository
and its parts, and the directories a site may move with an ``HPCML_*_DIR``
variable. Such a variable, when relative, means the directory the user ran
the command in, as a shell would read it. Without it the place is in the
repository this library was loaded from, never the current directory: the
suite writes its results there from wherever it is run, so ``hpcml report``
and ``hpcml references`` read them there too.

The values are read once, at import, as ReFrame reads its configuration.
"""
import os
import pathlib

#: The repository this library was loaded from.
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Training programs, run as ``python -m <program>`` with ``PYTHONPATH=SRC_DIR``.
SRC_DIR = REPO_ROOT / 'src'

#: Site configurations (``local.py``, ``slurm.py``, ``systems/``), the
#: published references and the score's weights.
CONFIG_DIR = REPO_ROOT / 'config'

#: The suite's test leaves, one file per workload.
CHECKS_DIR = REPO_ROOT / 'checks'

#: The image's recipe (``make image``: :mod:`hpctestlib_ml.image`) and the
#: Podman settings it runs with.
CONTAINERS_DIR = REPO_ROOT / 'containers'

#: The template a new workload starts from (``hpcml new-workload``).
WORKLOAD_TEMPLATE_DIR = REPO_ROOT / 'templates' / 'workload'


class UnwritableDirError(OSError):
    '''A directory the suite must write in and cannot, said in one line
    with the fix (ReFrame prints it as "failed to load configuration:
    ..." when a config file meets it).'''

    def __str__(self):
        return self.args[0]


#: How to move the results somewhere writable: said with
#: :class:`UnwritableDirError`.
MOVE_RESULTS = ('make it writable, or set HPCML_VAR_DIR (or give the '
                'session --prefix) to a directory you may write')


def writable_dir(path, fix=MOVE_RESULTS):
    '''Make directory *path* (and its parents); an
    :class:`UnwritableDirError` naming it and *fix* where that fails.'''
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise UnwritableDirError(
            f'cannot write in {err.filename or path} ({err.strerror}): '
            f'{fix}') from None
    return path


def user_path(path):
    '''*path* made absolute against the directory the user ran the command
    in. That is the shell's ``PWD``, not ``os.getcwd()``: ReFrame imports
    config files from inside their own directory, so the current directory
    is ``config/`` while they (and this module, with them) are
    imported.'''
    return os.path.join(os.environ.get('PWD', os.getcwd()), path)


def _env_dir(name, default):
    '''Directory from environment variable *name*, else *default*, made
    absolute (:func:`user_path`). A blank value is unset, as every
    setting's is (:func:`hpctestlib_ml.settings.env`): never a directory
    named with spaces.'''
    value = os.environ.get(name, '')
    return user_path(value if value.strip() else default)


#: Where runs write (stage, output, perflogs, results DB, reports,
#: baselines); ``HPCML_VAR_DIR`` moves it, e.g. to a shared file system.
VAR_DIR = _env_dir('HPCML_VAR_DIR', str(REPO_ROOT / 'var'))

#: Measurements kept between runs (the CPU peak); ``HPCML_CACHE_DIR`` moves it.
CACHE_DIR = _env_dir('HPCML_CACHE_DIR', os.path.join(VAR_DIR, 'cache'))

#: What ``hpcml prepare`` fetched for jobs that cannot reach a hub (a
#: partition's ``extras['prepared_dir']`` or ``-S prepared_dir=`` take
#: precedence in the checks); ``HPCML_PREPARED_DIR`` moves it.
PREPARED_DIR = _env_dir('HPCML_PREPARED_DIR',
                        os.path.join(VAR_DIR, 'prepared'))

#: Per-workload reference files (ReFrame 4.10 external references):
#: published references, and those ``hpcml references`` derives from a
#: site's history. ``HPCML_REFERENCES_DIR`` points the checks at another
#: directory of such files.
REFERENCES_DIR = pathlib.Path(_env_dir('HPCML_REFERENCES_DIR',
                                       str(CONFIG_DIR / 'references')))

#: ReFrame's run reports: those of ``hpcml suite`` and of every session
#: (a session given ``--prefix DIR`` writes them, with its perflogs,
#: results database and ``reframe.log``, under DIR instead:
#: :func:`hpctestlib_ml.siteconfig.results_dir`).
REPORTS_DIR = os.path.join(VAR_DIR, 'reports')

#: Where ``hpcml report`` and ``hpcml references`` read perflogs by
#: default: where the suite's configurations write them (``perflogs``
#: under ReFrame's prefix, which is :data:`VAR_DIR` unless ``--prefix``
#: moves it).
PERFLOG_DIR = os.path.join(VAR_DIR, 'perflogs')
