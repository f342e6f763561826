"""The history store: a columnar copy of a directory of perflogs (Parquet
files read by polars), extended with only the lines written since it was
last brought up to date, so that a report on years of nightly runs and
node sweeps reads in seconds what it would otherwise re-parse line by
line. The perflogs stay the source of truth: the store is rebuilt from
them whenever it is missing, stale or of another :data:`FORMAT` (without
a word) or unreadable (with one line saying so).

Why Parquet and polars: polars comes with ReFrame (no new dependency);
its lazy scans read only the columns and row groups a query needs (a
night's report on 10 million lines reads each part's counts per day and
the row groups of the latest nights, not the lines), and an update is one
new Parquet file of the new lines (:mod:`.store_update`), merged with
others once :data:`~.store_update.FANOUT` of one size have piled up, so
that each line is rewritten only a few times over the store's life.
DuckDB would do the same work as a ~30 MB dependency (bench/README.md,
"The history store").

Layout of a store (one per perflog directory or file, under ``history/``
beside the results it was asked for, ``$HPCML_VAR_DIR/history/`` or
``DIR/history/`` for ``hpcml report --prefix DIR``, or :data:`STORE_ENV`):

- ``manifest.json``: :data:`FORMAT`, the source, each perflog file read
  (its inode, the bytes and lines read, its header, a digest of the last
  line read, its dry-run and skipped lines), the parts, and the numbering
  of cases, workloads, systems, partitions and nodes;
- ``part-N.parquet``: one row per run: the numbered keys (``case``: the
  run's :attr:`~.history.Run.case_here`; ``group``: its
  :attr:`~.history.Run.case`), its time, whether it passed, a column
  ``v:<metric>`` per figure, and its perflog line (``raw``), read back
  only for the runs a report shows (:mod:`.recent`);
- ``part-N.days.parquet``: the same rows counted per file, case and
  :data:`~.store_parts.DAY` (:func:`~.store_parts.day_counts`): what a
  report reads of the whole history, in rows that grow with the days and
  the cases, not the runs.

This module keeps the manifest and opens a store (:func:`open_store`);
:mod:`.store_update` brings it up to date; :mod:`.store_parts` writes and
checks its Parquet files.

A perflog that grew is read from where the store stopped; one renamed
(ReFrame moves a file whose header changed to ``.h0``, logrotate ``C.log``
to ``C.log.1``) keeps what was read of it; one that was replaced, cut or
rewritten is read again from its first line, its old rows left out of
every query and dropped at the next merge. A perflog that cannot be read
is left out, said in one line by the command.

Faults: a store that polars cannot read (a manifest or a part, or a data
page under an intact footer, seen only when a report reads it) is rebuilt
with one line; a full disk while it is written is one line, and the
perflogs are read line by line (:func:`open_store`).
"""
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import sys

import polars as pl

from hpctestlib_ml import settings
from hpctestlib_ml.report import store_parts, store_update

#: The store's format: a store of another is rebuilt.
FORMAT = 2
#: Where the stores live, or ``off`` (the perflogs read line by line at
#: every report): the setting ``HPCML_HISTORY_STORE``, declared in
#: :mod:`hpctestlib_ml.settings` (default: :func:`store_root`).
STORE_ENV = 'HPCML_HISTORY_STORE'

#: A URL's scheme (``s3://``, ``file://``, ``https://``).
_URL = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*://')


def store_root(results_dir=None):
    '''The directory the stores live in, or None where they are off:
    :data:`STORE_ENV`, else ``history/`` in *results_dir* (where the
    session wrote: ``hpcml report --prefix DIR``), else in VAR_DIR. A
    :data:`STORE_ENV` that names something other than a directory is a
    :class:`~hpctestlib_ml.settings.SettingError`.'''
    from hpctestlib_ml import paths
    setting = (settings.env(STORE_ENV) or '').strip()
    if setting.lower() == 'off':
        return None
    if _URL.match(setting):
        # polars would take the parts' paths for a bucket's and try to
        # reach it, while the lock went into a directory named 's3:'.
        _refuse(setting, 'a URL: the store is a directory of this file '
                         'system')
    if setting and os.path.exists(setting) and not os.path.isdir(setting):
        _refuse(setting, 'not a directory')
    return setting or os.path.join(results_dir or paths.VAR_DIR, 'history')


def _refuse(setting, why):
    raise settings.SettingError(
        f'{STORE_ENV} must be a directory or off, got {setting!r} ({why}): '
        f'{settings.env_fix(STORE_ENV)}')


def store_dir(root, source):
    '''The store of the perflogs at *source* (a directory or a file).'''
    real = os.path.realpath(source)
    digest = hashlib.sha1(real.encode()).hexdigest()[:16]
    return os.path.join(root, f'{os.path.basename(real) or "root"}-{digest}')


class Store:
    '''One perflog source's store (:func:`open_store`).'''

    def __init__(self, directory, source):
        self.directory = directory
        self.given = str(source)
        self.source = os.path.realpath(source)
        self.manifest = None
        #: Perflogs left out at the last update: path -> why, with the fix
        #: (:class:`~.history.UnreadablePerflog`).
        self.unreadable = {}
        #: Parts merged into another, removed once the manifest is saved.
        self.obsolete = []

    # The manifest

    def path(self, name):
        '''The file *name* of the store.'''
        return os.path.join(self.directory, name)

    def _empty(self):
        return {'format': FORMAT, 'source': self.source, 'files': {},
                'next_fid': 0, 'next_part': 0, 'parts': [],
                'keys': {k: {} for k in ('case', 'group', 'workload',
                                         'system', 'partition', 'node')},
                'metrics': {}, 'workload_metrics': {}}

    def load(self, verify=False):
        '''Read the manifest: False where there is none or it is of another
        format or source (a rebuild without a word);
        :class:`.store_parts.StoreError` where it or a part cannot be read
        (with *verify*, any value of a part:
        :func:`.store_parts.check_part`).'''
        path = self.path('manifest.json')
        if not os.path.exists(path):
            return False
        try:
            with open(path) as fp:
                manifest = json.load(fp)
        except (OSError, ValueError) as err:
            raise store_parts.StoreError(f'manifest.json: {err}') from None
        if not isinstance(manifest, dict) or manifest.get('format') != FORMAT:
            return False
        if manifest.get('source') != self.source:
            return False
        try:
            files = {p: store_update.Entry(**e)
                     for p, e in manifest['files'].items()}
            for part in manifest['parts']:
                store_parts.check_part(self.path(part['name']),
                                       store_parts.ROW_COLUMNS, verify)
                store_parts.check_part(
                    self.path(store_parts.days_name(part['name'])),
                    store_parts.DAY_COLUMNS, verify)
        except (KeyError, TypeError) as err:
            raise store_parts.StoreError(f'manifest.json: {err!r}') from None
        manifest['files'] = files
        self.manifest = manifest
        return True

    def _save(self):
        data = {**self.manifest, 'files': {
            p: dataclasses.asdict(e) for p, e in self.manifest['files'].items()}}
        partial = self.path('manifest.json.partial')
        with open(partial, 'w') as fp:
            json.dump(data, fp)
        os.replace(partial, self.path('manifest.json'))

    def reset(self):
        '''An empty store (its old parts removed).'''
        os.makedirs(self.directory, exist_ok=True)
        for name in os.listdir(self.directory):
            if name.startswith('part-') or name.startswith('manifest'):
                os.remove(self.path(name))
        self.manifest = self._empty()

    def discard_unsaved(self):
        '''Remove what an update that failed wrote (its ``.partial`` files
        and its new parts): what the saved manifest names stays. Where
        that names a part that is gone, the manifest goes too (the next
        report rebuilds the store).'''
        try:
            with open(self.path('manifest.json')) as fp:
                saved = [p['name'] for p in json.load(fp)['parts']]
        except (OSError, ValueError, KeyError, TypeError):
            saved = []
        names = set(saved) | {store_parts.days_name(n) for n in saved}
        for name in os.listdir(self.directory):
            if name.endswith('.partial') or (name.startswith('part-') and
                                             name not in names):
                with contextlib.suppress(OSError):
                    os.remove(self.path(name))
        if not all(os.path.exists(self.path(n)) for n in names):
            with contextlib.suppress(OSError):
                os.remove(self.path('manifest.json'))

    def number(self, kind, key):
        '''The number of *key* among the store's *kind* (case, workload...).'''
        table = self.manifest['keys'][kind]
        if key not in table:
            table[key] = len(table)
        return table[key]

    @property
    def live_fids(self):
        return sorted(e.fid for e in self.manifest['files'].values())

    def new_part_name(self):
        '''The name of the store's next part (numbered once).'''
        number = self.manifest['next_part']
        self.manifest['next_part'] += 1
        return f'part-{number:06d}.parquet'

    # Bringing it up to date

    def update(self):
        '''Read what the perflogs gained since the last update
        (:func:`.store_update.update`), save the manifest, then remove the
        parts merged into others (named in :attr:`obsolete`: until the
        manifest is saved, the saved one names them). Returns the lines
        read.'''
        self.unreadable = {}
        read = store_update.update(self)
        self._save()
        for name in self.obsolete:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path(name))
        self.obsolete = []
        return read

    # Reading

    def scan(self, days=False):
        '''A polars LazyFrame of the live rows of every part (with *days*,
        of their counts per day: :func:`.store_parts.day_counts`).'''
        parts = self.manifest['parts']
        if not parts:
            return None
        names = [store_parts.days_name(p['name']) if days else p['name']
                 for p in parts]
        frame = pl.concat([pl.scan_parquet(self.path(name))
                           for name in names], how='diagonal_relaxed')
        return frame.filter(pl.col('fid').is_in(self.live_fids))

    def counts(self):
        '''(runs, dry-run lines, {skip reason: lines}, files) read.'''
        entries = self.manifest['files'].values()
        skipped = {}
        for entry in entries:
            for reason, count in entry.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + count
        return (sum(e.runs for e in entries),
                sum(e.dry_run for e in entries), skipped,
                sorted(self._given(p) for p in self.manifest['files']))

    def left_out(self):
        ''':attr:`unreadable`, by the paths under the source as given.'''
        return {self._given(p): why for p, why in self.unreadable.items()}

    def _given(self, path):
        '''*path* (under the real source) under the source as given.'''
        if path == self.source:
            return self.given
        return os.path.join(self.given, os.path.relpath(path, self.source))


@contextlib.contextmanager
def open_store(source, warn=None, results_dir=None, verify=False):
    '''The up-to-date :class:`Store` of the perflogs at *source* (locked
    while in use), in :func:`store_root` of *results_dir*, or None where
    stores are off (:data:`STORE_ENV`) or cannot be kept (an unwritable
    directory, a full disk). A missing, stale or older store is rebuilt
    without a word; an unreadable one with one line to *warn* (default:
    stderr), and so is a full disk. *verify*: every value of every part is
    read (:func:`.store_parts.check_part`), after a report could not read
    one.'''
    warn = warn or _stderr
    root = store_root(results_dir)
    if root is None:
        yield None
        return
    directory = store_dir(root, source)
    try:
        os.makedirs(directory, exist_ok=True)
        lock = open(os.path.join(directory, 'lock'), 'w')
    except OSError as err:
        full = store_parts.disk_full(err, _existing(directory))
        if full:
            warn(_full_line(directory, full))
        elif settings.env(STORE_ENV):   # named by the user: say so
            _refuse(root, err.strerror or str(err))
        yield None                      # the default: read line by line
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        store = Store(directory, source)
        try:
            loaded = store.load(verify)
        except store_parts.StoreError as err:
            warn(f'hpcml: the history store {directory} could not be read '
                 f'({err}): rebuilt from the perflogs')
            loaded = False
        if not loaded:
            store.reset()
        yield store if _bring_up_to_date(store, warn) else None


def _bring_up_to_date(store, warn):
    '''Whether *store* could be brought up to date (:meth:`Store.update`).
    Where it could not, what the update wrote is removed: on a full disk
    with one line (then, and where the store may not be written, the
    perflogs are read line by line); where polars could not read a part
    while merging, the store is rebuilt with one line.'''
    for attempt in (1, 2):
        try:
            store.update()
            return True
        except store_parts.READ_ERRORS as err:
            full = store_parts.disk_full(err, store.directory)
            store.discard_unsaved()
            if full:
                warn(_full_line(store.directory, full))
                return False
            if isinstance(err, OSError) or attempt == 2:
                return False
            first = (str(err) or type(err).__name__).splitlines()[0]
            warn(f'hpcml: the history store {store.directory} could not be '
                 f'updated ({first}): rebuilt from the perflogs')
            store.reset()
    return False


def _full_line(directory, free):
    '''The line that says the disk of store *directory* is full.'''
    return (f'hpcml: the history store {directory} could not be written: '
            f'the disk is full ({free}): the perflogs were read line by '
            f'line; free space there, or keep the stores elsewhere with '
            f'{STORE_ENV}=DIR (or none: {STORE_ENV}=off)')


def _existing(path):
    '''*path*, or the nearest directory above it that exists.'''
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _stderr(line):
    print(line, file=sys.stderr)
