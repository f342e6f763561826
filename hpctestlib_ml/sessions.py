"""ReFrame sessions that overlap on one VAR_DIR run apart.

Two sessions staging into the same directories delete each other's files
(ReFrame cleans a test's stage directory before it uses it). So the first
ReFrame session on a VAR_DIR holds an exclusive lock on
``VAR_DIR/.session.lock`` for its whole life and uses the usual
``VAR_DIR/stage`` and ``VAR_DIR/output``. A session that starts while
another holds it gets directories of its own,
``VAR_DIR/stage/session-<time>-<pid>`` and ``VAR_DIR/output/session-...``
(the layout of ReFrame's ``--timestamp``), and says so in one line. A
session given ``--prefix DIR`` (or ``RFM_PREFIX``) does the same in DIR.
Where the user chose the stage or output directory itself (``--stage``,
``--output`` or their ``RFM_*`` variables), it is left as chosen.

What the sessions share stays whole: perflog lines are appended under
ReFrame's file lock (``locking_enable`` of the perflog handler) and the
results database is written under ReFrame's own lock
(``tests/test_sessions.py`` runs two sessions at once and reads both back).

Each result logs the session it came from (:func:`session_id`), so that
``hpcml references`` can tell runs of one sitting from runs of many.
"""
import fcntl
import os
import socket
import sys
import time

from hpctestlib_ml.paths import (MOVE_RESULTS, UnwritableDirError,
                                 user_path, writable_dir)

LOCK_NAME = '.session.lock'

#: Options and variables with which the user chose the stage or output
#: directory itself.
_USER_DIR_OPTIONS = ('--stage', '-s', '--output', '-o')
_USER_DIR_VARIABLES = ('RFM_STAGE_DIR', 'RFM_OUTPUT_DIR')

#: The lock of this process's session: (VAR_DIR, open file), or None. Kept
#: here, not in a config file, because ReFrame may import a config file
#: more than once, and a second flock on another descriptor of this same
#: process would find the lock taken.
_held = {}

#: This process's session name, made once (:func:`session_id`).
_session = {}


def session_id():
    '''The name of this process's ReFrame session, the same for every
    case it runs: its first call's time (UTC), pid and host, e.g.
    ``20261126T144750Z-1234@n1``. Logged with every result
    (``session_id``), it tells the runs of one sitting (``--repeat 5``)
    from those of several.'''
    if not _session:
        stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
        host = socket.gethostname().split('.')[0]
        _session['id'] = f'{stamp}-{os.getpid()}@{host}'
    return _session['id']


def in_reframe_session():
    '''Whether this process is ReFrame's command (not a test or a tool
    that loads a config file to read it).'''
    return 'reframe.frontend.cli' in sys.modules


def prefix_options(argv):
    '''``(index, directory, joined)`` of each ReFrame ``--prefix`` in
    *argv*: the index of the argument that holds the directory, and
    whether it is written ``--prefix=DIR`` (else ``--prefix DIR``).'''
    for i, arg in enumerate(argv):
        if arg == '--prefix' and i + 1 < len(argv):
            yield i + 1, argv[i + 1], False
        elif arg.startswith('--prefix='):
            yield i, arg.split('=', 1)[1], True


def prefix_asked(argv=None, environ=None):
    '''The prefix ReFrame's ``--prefix DIR`` (or ``RFM_PREFIX``) gives
    this session, as given; None without one.'''
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    given = [directory for _, directory, _ in prefix_options(argv)]
    return given[-1] if given else environ.get('RFM_PREFIX') or None


def prefix_dir(default, argv=None, environ=None):
    '''The directory of this session's prefix (:func:`prefix_asked`),
    else *default*.'''
    prefix = prefix_asked(argv, environ)
    return user_path(prefix) if prefix else default


def _user_chose_dirs(argv=None, environ=None):
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in _USER_DIR_VARIABLES):
        return True
    for arg in argv:
        if arg.split('=', 1)[0] in _USER_DIR_OPTIONS:
            return True
        if arg[:2] in ('-s', '-o') and len(arg) > 2:      # -sDIR, -oDIR
            return True
    return False


def claim_var_dir(var_dir):
    '''Take *var_dir*'s session lock for this process if it is free.
    Returns None if this process holds it now, else the pid (or '?') of
    the session that holds it.'''
    if var_dir in _held:
        return None
    writable_dir(var_dir)
    path = os.path.join(var_dir, LOCK_NAME)
    try:
        fp = open(path, 'a+')
    except OSError as err:
        raise UnwritableDirError(f'cannot take the session lock {path} '
                                 f'({err.strerror}): {MOVE_RESULTS}') from None
    try:
        fcntl.flock(fp, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fp.seek(0)
        holder = fp.read().strip() or '?'
        fp.close()
        return holder
    fp.seek(0)
    fp.truncate()
    fp.write(str(os.getpid()))
    fp.flush()
    _held[var_dir] = fp          # open, so locked, until the process ends
    return None


def session_dirs(var_dir, in_session=None, user_chose=None, argv=None,
                 environ=None):
    '''``stagedir``/``outputdir`` settings of a system on *var_dir*, or on
    the session's ``--prefix`` where it has one: none (ReFrame's defaults
    under the prefix) unless another session is running there, then this
    session's own, announced on stderr.'''
    in_session = in_reframe_session() if in_session is None else in_session
    user_chose = (_user_chose_dirs(argv, environ) if user_chose is None
                  else user_chose)
    if not in_session or user_chose:
        return {}
    var_dir = prefix_dir(var_dir, argv, environ)
    holder = claim_var_dir(var_dir)
    if holder is None:
        return {}
    name = f'session-{time.strftime("%Y%m%dT%H%M%S")}-{os.getpid()}'
    dirs = {'stagedir': os.path.join(var_dir, 'stage', name),
            'outputdir': os.path.join(var_dir, 'output', name)}
    print(f'hpcml: another ReFrame session (pid {holder}) is running on '
          f'{var_dir}: this one stages in {dirs["stagedir"]} and writes '
          f'its outputs to {dirs["outputdir"]} (perflogs and the results '
          f'database are shared)', file=sys.stderr)
    return dirs
