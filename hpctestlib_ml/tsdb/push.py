"""Every performance record of a session to VictoriaMetrics, through
ReFrame's ``httpjson`` perflog handler with this module's
:func:`json_formatter` (as CSCS sends theirs: eth-cscs/cscs-reframe-tests
PR #405, ``config/common.py``), without changing the perflogs (their
handler comes first, and this one never raises).

ReFrame's handler posts each record itself, with no timeout (a slow
database would hold the session) and drops a record whose post fails
(``HTTPJSONHandler.emit``, reframe/core/logging.py 4.10). So the formatter
sends the record itself and gives the handler nothing to post
(``None``): it first appends the record's lines to an outbox on disk
(:func:`outbox_path`), then posts the whole outbox to ``/api/v1/import``
with a short timeout (:data:`TIMEOUT`), emptying it when the database took
it. A database that is down or slow costs a session two timeouts at most:
at the first post that fails the session stops trying and keeps its
records in the outbox; it tries once more at its end and says in one line
how many it kept; the next session's first record sends them. Past :data:`MAX_KEPT` lines, the oldest are dropped,
with one line and their count.

ReFrame checks that the database answers when a session starts and
leaves the handler out for that session otherwise (its warning
``httpjson: could not connect to server``): that session's records are
in its perflogs only.
"""
import atexit
import contextlib
import fcntl
import json
import os
import sys
import urllib.error
import urllib.request

from hpctestlib_ml import settings
from hpctestlib_ml.tsdb import series

#: The site setting: VictoriaMetrics' base URL (``http://host:8428``),
#: declared in :mod:`hpctestlib_ml.settings` (unset: nothing is sent).
URL_ENV = 'HPCML_TSDB_URL'
#: Seconds to connect and to be answered (each).
TIMEOUT = 3.0
#: Lines kept at most while the database is away.
MAX_KEPT = 1_000_000


def url():
    ''':data:`URL_ENV` checked ('' where unset); a bad one is a
    :class:`~hpctestlib_ml.settings.SettingError`.'''
    return (settings.env(URL_ENV) or '').rstrip('/')


def outbox_path():
    '''The records not yet taken by the database:
    ``$HPCML_VAR_DIR/tsdb/outbox.jsonl``.'''
    from hpctestlib_ml import paths
    return os.path.join(paths.VAR_DIR, 'tsdb', 'outbox.jsonl')


def _text(value):
    '''A record field as the perflog writes it (ReFrame's formatting).'''
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, set)):
        return ','.join(_text(v) for v in value)
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def record_lines(record):
    '''The import lines (:func:`~.series.import_lines`) of a ReFrame
    performance log record.'''
    get = record.__dict__.get
    fields = {name: _text(get(f'check_{name}'))
              for name in series.LABELS if f'check_{name}' in record.__dict__}
    labels = series.run_labels(get('check_system') or '',
                               get('check_partition') or '',
                               get('check_environ') or '',
                               get('check_display_name') or '', fields)
    figures = {}
    for key, info in (get('check_perfvalues') or {}).items():
        value, ref, lower, upper, unit = info[:5]
        figures[key.rsplit(':', 1)[-1]] = (value, unit, ref, lower, upper)
    when = get('check_job_completion_time_unix') or record.created
    return series.import_lines(labels, float(when), get('check_result'),
                               figures)


class Sender:
    '''The outbox and its sending, for one process.'''

    def __init__(self, base, path):
        self.base = base
        self.path = path
        self.down = None        # why the database did not take the outbox
        self.sent = 0
        self.dropped = 0

    @contextlib.contextmanager
    def _locked(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, 'a+') as fp:
            fcntl.flock(fp, fcntl.LOCK_EX)
            yield fp

    def submit(self, lines):
        with self._locked() as fp:
            fp.write(lines)
            fp.flush()
            self._cap(fp)
            if self.down is None:
                self._send(fp)

    def _cap(self, fp):
        fp.seek(0)
        kept = fp.readlines()
        if len(kept) > MAX_KEPT:
            drop = len(kept) - MAX_KEPT
            self.dropped += drop
            fp.seek(0)
            fp.truncate()
            fp.writelines(kept[drop:])
            fp.flush()

    def _send(self, fp):
        '''Post the outbox; empty it where the database took it.'''
        fp.seek(0)
        data = fp.read()
        if not data:
            return
        request = urllib.request.Request(
            f'{self.base}/api/v1/import', data=data.encode(),
            headers={'Content-Type': 'application/x-ndjson'}, method='POST')
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                answer.read()
        except (urllib.error.URLError, OSError, ValueError) as err:
            self.down = str(getattr(err, 'reason', err))
            return
        self.sent += data.count('\n')
        fp.seek(0)
        fp.truncate()

    def close(self):
        '''At the session's end: one more try, and one line for what was
        kept or dropped.'''
        if not os.path.exists(self.path):
            return
        with self._locked() as fp:
            if self.down is not None:
                self.down = None
                self._send(fp)
            fp.seek(0)
            kept = sum(1 for _ in fp)
        if kept:
            print(f'hpcml: {kept} performance series lines not taken by '
                  f'{self.base} ({self.down}): kept in {self.path}; the next '
                  f'session sends them', file=sys.stderr)
        if self.dropped:
            print(f'hpcml: {self.dropped} performance series lines dropped '
                  f'from {self.path} (more than {MAX_KEPT} kept while '
                  f'{self.base} was away)', file=sys.stderr)


_SENDER = None


def sender():
    '''This process' :class:`Sender` (closed at exit).'''
    global _SENDER
    if _SENDER is None:
        _SENDER = Sender(url(), outbox_path())
        atexit.register(_SENDER.close)
    return _SENDER


def json_formatter(record, extras, ignore_keys):
    '''ReFrame's ``httpjson`` ``json_formatter``: sends *record*
    (module docstring) and returns None, so that the handler posts
    nothing itself.'''
    try:
        sender().submit(record_lines(record))
    except Exception as err:        # an outbox that cannot be written...:
        # the run and its perflog line go on regardless
        print(f'hpcml: performance record not sent to the time-series '
              f'database: {err}', file=sys.stderr)
    return None


def handler():
    '''The ``httpjson`` perflog handler that sends to ``HPCML_TSDB_URL``,
    or None where it is unset.'''
    base = url()
    if not base:
        return None
    return {'type': 'httpjson', 'url': f'{base}/api/v1/import',
            'level': 'info', 'json_formatter': json_formatter}
