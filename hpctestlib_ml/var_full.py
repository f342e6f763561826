"""One line, instead of Python logging's tracebacks, when the file system
that holds the suite's var/ is full.

ReFrame logs to files under var/ (``reframe.log``, the perflogs). On a full
file system each record's write fails, and Python's logging prints each
failure as a "--- Logging error ---" traceback (``OSError: [Errno 28] No
space left on device``): dozens for one failed case, and no line that says
what happened. The site configuration installs :func:`install`, which says
it once: which path, that var/ is full, that what earlier runs wrote there
is intact (a run only appends to var/'s files, it never rewrites them),
and the fix.
"""
import errno
import logging
import os
import shutil
import sys

#: The errnos of a file system that takes no more data: no space left, the
#: user's quota exceeded.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)

#: The marker on the wrapper, so that a configuration loaded twice (ReFrame
#: loads a site file per run and per test) wraps once.
_MARK = '_hpcml_var_full'


def mount_point(path):
    '''The mount point of the file system that holds *path* (or its
    nearest existing parent).'''
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def _size(num):
    '''*num* bytes in the largest binary unit that keeps it >= 1.'''
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if num < 1024 or unit == 'TiB':
            return f'{num:.0f} {unit}' if unit == 'B' else f'{num:.1f} {unit}'
        num /= 1024


def full_message(path, var_dir, err):
    '''The one line for *err* (an :data:`FULL_ERRNOS` error) on writing
    *path* under the suite's *var_dir*: the category, the path and its
    file system, that earlier results are intact, the fix.'''
    mount = mount_point(path or var_dir)
    try:
        usage = shutil.disk_usage(mount)
        space = f', {_size(usage.free)} free of {_size(usage.total)}'
    except OSError:
        space = ''
    return (f"filesystem: the suite's var/ is full: cannot write {path} "
            f'({err.strerror}; file system {mount}{space}); what earlier '
            f'runs wrote in {var_dir} (perflogs, results.db, reports) is '
            f'intact, this run\'s results may be missing; free space there '
            f'or set HPCML_VAR_DIR to a directory on another file system')


def _write_nowhere(handler):
    '''Point a file *handler* whose file system is full at os.devnull: its
    records cannot be kept, and its buffered ones would fail again at each
    flush and at its close at exit (ReFrame's logging shutdown: "Exception
    ignored in atexit callback ... OSError: [Errno 28]"). The file keeps
    what was written before.'''
    old = getattr(handler, 'stream', None)
    if old is None or not getattr(handler, 'baseFilename', None):
        return
    handler.stream = open(os.devnull, 'w')
    try:
        old.close()
    except OSError:
        pass            # its buffer: what the file system refused


def install(var_dir, stream=None):
    '''Wrap :meth:`logging.Handler.handleError`, as ReFrame itself does for
    ``BrokenPipeError`` (``reframe/core/logging.py``): a handler's write
    that fails with a full file system prints :func:`full_message` on
    *stream* (stderr) once per process and nothing after, and the handler
    writes nowhere from then on (:func:`_write_nowhere`); every other error
    is handled as before. Once per process, however often the site
    configuration is loaded.'''
    original = logging.Handler.handleError
    if getattr(original, _MARK, False):
        return

    said = []

    def handle_error(handler, record):
        '''The error being handled is sys.exc_info()'s (logging calls
        this inside its except clause).'''
        err = sys.exc_info()[1]
        if not isinstance(err, OSError) or err.errno not in FULL_ERRNOS:
            return original(handler, record)
        if not said:
            said.append(True)
            path = getattr(handler, 'baseFilename', None) or err.filename
            print(full_message(path, var_dir, err),
                  file=stream or sys.stderr, flush=True)
        _write_nowhere(handler)
        return None

    setattr(handle_error, _MARK, True)
    logging.Handler.handleError = handle_error
