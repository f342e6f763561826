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
new Parquet file of the new lines (:meth:`Store.update`), merged with
others once :data:`FANOUT` of one size have piled up, so that each line
is rewritten only a few times over the store's life. DuckDB would do the
same work as a ~30 MB dependency (bench/README.md, "The history store").

Layout of a store (one per perflog directory or file, under
``$HPCML_VAR_DIR/history/``, or :data:`STORE_ENV`):

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
  :data:`DAY` (:func:`day_counts`): what a report reads of the whole
  history, in rows that grow with the days and the cases, not the runs.

A perflog that grew is read from where the store stopped; one that was
replaced, cut, rewritten or rotated (ReFrame moves a file whose header
changed to ``.h0``) is read again from its first line, its old rows left
out of every query and dropped at the next merge.
"""
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import math
import os
import sys

import polars as pl

from hpctestlib_ml import settings
from hpctestlib_ml.report import history
from hpctestlib_ml.report import perflog_columns as columns

#: The store's format: a store of another is rebuilt.
FORMAT = 2
#: Where the stores live, or ``off`` (the perflogs read line by line at
#: every report): the setting ``HPCML_HISTORY_STORE``, declared in
#: :mod:`hpctestlib_ml.settings` (default ``$HPCML_VAR_DIR/history``).
STORE_ENV = 'HPCML_HISTORY_STORE'
#: Rows written to one Parquet file at most while reading (bounds memory).
CHUNK_ROWS = 100_000
#: Bytes of a perflog read at a time.
CHUNK_BYTES = 8 << 20
#: Rows of a Parquet row group: a query for recent runs reads the groups
#: of their times only.
ROW_GROUP = 65536
#: Parts of one size class merged into one (:meth:`Store._merge`).
FANOUT = 8
#: The time buckets (seconds) of a part's counts (:func:`day_counts`): a
#: day, a night's sweep.
DAY = 86400.0


#: The numbered keys of each row, and their types.
KEY_COLUMNS = {'case': pl.Int32, 'group': pl.Int32, 'workload': pl.Int32,
               'system': pl.Int32, 'partition': pl.Int32, 'node': pl.Int32,
               'keyed': pl.Boolean}


#: The columns of every row (beside a ``v:<metric>`` column per figure).
ROW_COLUMNS = ('fid', 'line', 'time', 'ok', 'raw', *KEY_COLUMNS)


class StoreError(Exception):
    '''A store that cannot be read: rebuilt from the perflogs.'''


def store_root():
    '''The directory the stores live in, or None where they are off; a
    :data:`STORE_ENV` that names something other than a directory is a
    :class:`~hpctestlib_ml.settings.SettingError`.'''
    from hpctestlib_ml import paths
    setting = (settings.env(STORE_ENV) or '').strip()
    if setting.lower() == 'off':
        return None
    if setting and os.path.exists(setting) and not os.path.isdir(setting):
        _refuse(setting, 'not a directory')
    return setting or os.path.join(paths.VAR_DIR, 'history')


def _refuse(setting, why):
    raise settings.SettingError(
        f'{STORE_ENV} must be a directory or off, got {setting!r} ({why}): '
        f'{settings.env_fix(STORE_ENV)}')


def store_dir(root, source):
    '''The store of the perflogs at *source* (a directory or a file).'''
    real = os.path.realpath(source)
    digest = hashlib.sha1(real.encode()).hexdigest()[:16]
    return os.path.join(root, f'{os.path.basename(real) or "root"}-{digest}')


def _digest(data):
    return hashlib.sha1(data).hexdigest()


def _case_key(run):
    return json.dumps(run.case_here)


@dataclasses.dataclass
class Entry:
    '''What the store read of one perflog file.'''
    fid: int                # numbers the rows read from it
    inode: int
    consumed: int           # bytes read
    lines: int              # data lines read
    header: str             # its first line
    tail: str               # digest of the last bytes read
    clean_end: bool         # the bytes read end with a newline
    runs: int = 0
    dry_run: int = 0
    skipped: dict = dataclasses.field(default_factory=dict)


class Store:
    '''One perflog source's store (:func:`open_store`).'''

    def __init__(self, directory, source):
        self.directory = directory
        self.given = str(source)
        self.source = os.path.realpath(source)
        self.manifest = None

    # The manifest

    def _path(self, name):
        return os.path.join(self.directory, name)

    def _empty(self):
        return {'format': FORMAT, 'source': self.source, 'files': {},
                'next_fid': 0, 'next_part': 0, 'parts': [],
                'keys': {k: {} for k in ('case', 'group', 'workload',
                                         'system', 'partition', 'node')},
                'metrics': {}, 'workload_metrics': {}}

    def load(self):
        '''Read the manifest: False where there is none or it is of another
        format or source (a rebuild without a word); :class:`StoreError`
        where it or a part cannot be read.'''
        path = self._path('manifest.json')
        if not os.path.exists(path):
            return False
        try:
            with open(path) as fp:
                manifest = json.load(fp)
        except (OSError, ValueError) as err:
            raise StoreError(f'manifest.json: {err}') from None
        if not isinstance(manifest, dict) or manifest.get('format') != FORMAT:
            return False
        if manifest.get('source') != self.source:
            return False
        try:
            files = {p: Entry(**e) for p, e in manifest['files'].items()}
            for part in manifest['parts']:
                _check_part(self._path(part['name']), ROW_COLUMNS)
                _check_part(self._path(_days_name(part['name'])),
                            DAY_COLUMNS)
        except (KeyError, TypeError) as err:
            raise StoreError(f'manifest.json: {err!r}') from None
        manifest['files'] = files
        self.manifest = manifest
        return True

    def _save(self):
        data = {**self.manifest, 'files': {
            p: dataclasses.asdict(e) for p, e in self.manifest['files'].items()}}
        partial = self._path('manifest.json.partial')
        with open(partial, 'w') as fp:
            json.dump(data, fp)
        os.replace(partial, self._path('manifest.json'))

    def reset(self):
        '''An empty store (its old parts removed).'''
        os.makedirs(self.directory, exist_ok=True)
        for name in os.listdir(self.directory):
            if name.startswith('part-') or name.startswith('manifest'):
                os.remove(self._path(name))
        self.manifest = self._empty()

    def number(self, kind, key):
        '''The number of *key* among the store's *kind* (case, workload...).'''
        table = self.manifest['keys'][kind]
        if key not in table:
            table[key] = len(table)
        return table[key]

    @property
    def live_fids(self):
        return sorted(e.fid for e in self.manifest['files'].values())

    # Bringing it up to date

    def update(self):
        '''Read what the perflogs gained since the last update: new lines
        of files that grew, every line of new and replaced files; forget
        files that are gone. Returns the lines read.'''
        files = (history.perflog_files(self.source)
                 if os.path.isdir(self.source) else [self.source])
        writer = _PartWriter(self)
        read = 0
        known = self.manifest['files']
        for path in list(known):
            if path not in files:
                del known[path]
        for path in files:
            try:
                read += self._update_file(path, known.get(path), writer)
            except FileNotFoundError:
                known.pop(path, None)
        writer.flush()
        self._merge()
        self._save()
        return read

    def _unchanged_prefix(self, path, entry, stat):
        '''Whether the bytes *entry* read are still the start of *path*.'''
        if (entry is None or entry.inode != stat.st_ino
                or stat.st_size < entry.consumed or not entry.clean_end):
            return False
        with open(path, 'rb') as fp:
            header = fp.readline()
            if header.decode(errors='replace').rstrip('\r\n') != entry.header:
                return False
            start = max(len(header), entry.consumed - 256)
            fp.seek(start)
            return _digest(fp.read(entry.consumed - start)) == entry.tail

    def _update_file(self, path, entry, writer):
        stat = os.stat(path)
        if not self._unchanged_prefix(path, entry, stat):
            entry = None
        if entry is not None and stat.st_size == entry.consumed:
            return 0
        if entry is None:
            entry = Entry(self.manifest['next_fid'], stat.st_ino, 0, 0, '',
                          '', True)
            self.manifest['next_fid'] += 1
            self.manifest['files'][path] = entry
        return _read_file(self, path, entry, writer)

    def _merge(self):
        '''Merge :data:`FANOUT` parts of one size class (rows, in powers of
        FANOUT) into one while there are as many, the smallest class
        first: each row is rewritten about log_FANOUT(rows) times over the
        store's life, and an update writes in proportion to its new lines.
        The parts of a class need not be neighbours (a query orders rows
        by file and line, never by part): an update's last, smaller part
        sits between larger ones and would otherwise stop every merge
        (a first build of 10.95 million lines left 92 parts).'''
        parts = self.manifest['parts']

        def level(part):
            return int(math.log(max(part['rows'], 1), FANOUT))

        while True:
            classes = {}
            for part in parts:
                classes.setdefault(level(part), []).append(part)
            full = [c for c in sorted(classes) if len(classes[c]) >= FANOUT]
            if not full:
                return
            merged = classes[full[0]][:FANOUT]
            names = {p['name'] for p in merged}
            parts[:] = [p for p in parts if p['name'] not in names]
            parts.append(self._rewrite(merged))

    def _rewrite(self, merged):
        '''One part of the live rows of *merged*, streamed (the merged
        parts are never in memory whole).'''
        frame = (pl.concat([pl.scan_parquet(self._path(p['name']))
                            for p in merged], how='diagonal_relaxed')
                 .filter(pl.col('fid').is_in(self.live_fids)))
        name = self._new_part_name()
        path = self._path(name)
        frame.sink_parquet(f'{path}.partial', row_group_size=ROW_GROUP)
        os.replace(f'{path}.partial', path)
        days = (pl.concat([pl.scan_parquet(self._path(_days_name(p['name'])))
                           for p in merged], how='diagonal_relaxed')
                .filter(pl.col('fid').is_in(self.live_fids)))
        _write(combine_days(days, DAY_KEYS).collect(),
               self._path(_days_name(name)))
        for part in merged:
            os.remove(self._path(part['name']))
            os.remove(self._path(_days_name(part['name'])))
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        return {'name': name, 'rows': rows}

    def _new_part_name(self):
        number = self.manifest['next_part']
        self.manifest['next_part'] += 1
        return f'part-{number:06d}.parquet'

    # Reading

    def scan(self, days=False):
        '''A polars LazyFrame of the live rows of every part (with *days*,
        of their counts per day: :func:`day_counts`).'''
        parts = self.manifest['parts']
        if not parts:
            return None
        frame = pl.concat([pl.scan_parquet(self._path(
            _days_name(p['name']) if days else p['name'])) for p in parts],
            how='diagonal_relaxed')
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

    def _given(self, path):
        '''*path* (under the real source) under the source as given.'''
        if path == self.source:
            return self.given
        return os.path.join(self.given, os.path.relpath(path, self.source))


def _days_name(part):
    return part.replace('.parquet', '.days.parquet')


#: The keys of a part's counts per day (:func:`day_counts`).
DAY_KEYS = ('fid', 'case', 'workload', 'system', 'partition', 'day')
#: The columns of every part's counts per day (beside ``min:<metric>``,
#: ``max:<metric>``, ``good:<metric>`` and ``has:<metric>`` per figure).
DAY_COLUMNS = (*DAY_KEYS, 'runs', 'failures', 'passed', 'unkeyed', 'latest',
               'earliest')


def day_counts(frame, keys=DAY_KEYS):
    '''The rows of *frame* (a part's, a LazyFrame) counted per *keys*
    (``day``: the :data:`DAY` of ``time``): runs, failures, passed, runs
    without a ``reference_case`` (``unkeyed``), latest and earliest time,
    and per figure its least and greatest passing value, its passing runs
    (``good:``) and its runs (``has:``). The counts of several parts are
    combined by :func:`combine_days`.'''
    figures = []
    for column in frame.collect_schema().names():
        if column.startswith('v:'):
            metric, value = column[2:], pl.col(column)
            passing = pl.when(pl.col('ok')).then(value)
            figures += [passing.min().alias(f'min:{metric}'),
                        passing.max().alias(f'max:{metric}'),
                        passing.is_not_null().sum().cast(pl.Int64)
                        .alias(f'good:{metric}'),
                        value.is_not_null().sum().cast(pl.Int64)
                        .alias(f'has:{metric}')]
    return frame.with_columns((pl.col('time') // DAY).alias('day')).group_by(
        keys).agg(
        pl.len().cast(pl.Int64).alias('runs'),
        (~pl.col('ok')).sum().cast(pl.Int64).alias('failures'),
        pl.col('ok').sum().cast(pl.Int64).alias('passed'),
        (~pl.col('keyed')).sum().cast(pl.Int64).alias('unkeyed'),
        pl.col('time').max().alias('latest'),
        pl.col('time').min().alias('earliest'), *figures)


def combine_days(frame, keys):
    ''':func:`day_counts` (a LazyFrame) combined per *keys*.'''
    combined = []
    for column in frame.collect_schema().names():
        if column in keys:
            continue
        if column.startswith(('min:', 'earliest')):
            combined.append(pl.col(column).min())
        elif column.startswith(('max:', 'latest')):
            combined.append(pl.col(column).max())
        else:
            combined.append(pl.col(column).sum())
    return frame.group_by(keys).agg(combined)


def _check_part(path, columns):
    ''':class:`StoreError` unless *path* is a readable Parquet file.'''
    try:
        schema = pl.read_parquet_schema(path)
    except FileNotFoundError:
        raise StoreError(f'{os.path.basename(path)} is missing') from None
    except Exception as err:        # polars' and the OS's errors alike
        raise StoreError(f'{os.path.basename(path)}: '
                         f'{str(err).splitlines()[0]}') from None
    missing = set(columns) - set(schema)
    if missing:
        raise StoreError(f'{os.path.basename(path)} lacks the columns '
                         f'{", ".join(sorted(missing))}')


def _write(frame, path):
    partial = f'{path}.partial'
    frame.write_parquet(partial, statistics=True, row_group_size=ROW_GROUP)
    os.replace(partial, path)


class _PartWriter:
    '''Blocks of runs (:func:`.perflog_columns.parse_block`) with their
    keys numbered, written as Parquet parts of about :data:`CHUNK_ROWS`
    rows.'''

    def __init__(self, store):
        self.store = store
        self.frames = []
        self.rows = 0

    def add(self, entry, frame, header):
        '''The runs of *frame*, read from *entry*'s file.'''
        if not frame.height:
            return
        store = self.store
        present = [n for n in columns.KEY_PARAMS if n in header.index]
        fields = [c for c in frame.columns if c.startswith('f:')]
        combos = frame.select(fields).unique()
        keys = {name: [] for name in KEY_COLUMNS}
        for row in combos.iter_rows(named=True):
            run = columns.run_for_keys(row, present)
            node = run.node
            keys['case'].append(store.number('case', json.dumps(
                run.case_here)))
            keys['group'].append(store.number('group', json.dumps(run.case)))
            keys['workload'].append(store.number('workload', _workload(run)))
            keys['system'].append(store.number('system', run.system))
            keys['partition'].append(store.number('partition',
                                                  run.partition))
            keys['node'].append(None if node is None else
                                store.number('node', node))
            keys['keyed'].append(bool(run.params.get('reference_case')))
        combos = combos.with_columns(
            pl.Series(name, values, dtype=KEY_COLUMNS[name])
            for name, values in keys.items())
        frame = (frame.join(combos, on=fields, how='left', nulls_equal=True)
                 .drop(fields)
                 .with_columns((pl.col('result') == 'pass').alias('ok'))
                 .drop('result')
                 .with_columns(pl.lit(entry.fid, pl.Int32).alias('fid'),
                               (pl.col('line') + entry.lines)
                               .cast(pl.Int32).alias('line')))
        seen = store.manifest['workload_metrics']
        for name in frame.columns:
            if name.startswith('v:'):
                store.manifest['metrics'][name[2:]] = True
        by_workload = frame.group_by('workload').agg(
            [pl.col(c).is_not_null().any() for c in frame.columns
             if c.startswith('v:')])
        names = {v: k for k, v in store.manifest['keys']['workload'].items()}
        for row in by_workload.iter_rows(named=True):
            listed = seen.setdefault(names[row['workload']], [])
            for column, logged in row.items():
                if column.startswith('v:') and logged and \
                        column[2:] not in listed:
                    listed.append(column[2:])
        entry.runs += frame.height
        self.frames.append(frame)
        self.rows += frame.height
        if self.rows >= CHUNK_ROWS:
            self.flush()

    def flush(self):
        if not self.rows:
            return
        frame = pl.concat(self.frames, how='diagonal_relaxed')
        name = self.store._new_part_name()
        _write(frame, self.store._path(name))
        _write(day_counts(frame.lazy()).collect(),
               self.store._path(_days_name(name)))
        self.store.manifest['parts'].append({'name': name,
                                             'rows': frame.height})
        self.frames, self.rows = [], 0


def _workload(run):
    try:
        return run.workload
    except IndexError:              # no workload parameter, no name
        return ''


def _read_file(store, path, entry, writer):
    '''Parse *path* from where *entry* stopped into *writer*'s parts;
    update *entry*; returns the lines read.'''
    read = 0
    with open(path, 'rb') as fp:
        if entry.consumed == 0:
            first = fp.readline()
            if not first:
                return 0
            entry.header = first.decode(errors='replace').rstrip('\r\n')
            entry.consumed = len(first)
            entry.clean_end = first.endswith(b'\n')
            entry.tail = _digest(first[-256:])
        header = next(history.perflog_rows(entry.header + '\n'), None)
        if not header:
            return 0
        parser = columns.Header(header)
        fp.seek(entry.consumed)
        pending = b''
        while True:
            block = fp.read(CHUNK_BYTES)
            if not block:
                break
            data = pending + block
            end = data.rfind(b'\n') + 1
            pending = data[end:]
            read += _parse_block(data[:end], parser, entry, writer)
            entry.consumed += end
            if end:
                entry.tail = _digest(_last_bytes(fp, entry.consumed))
        if pending:
            # A last line without its newline (a session killed while
            # writing): read as the line-by-line reader reads it; the file
            # is read again from its start once it grows.
            read += _parse_block(pending, parser, entry, writer)
            entry.consumed += len(pending)
            entry.clean_end = False
        else:
            entry.clean_end = True
    return read


def _last_bytes(fp, end):
    here = fp.tell()
    start = max(0, end - 256)
    fp.seek(start)
    data = fp.read(end - start)
    fp.seek(here)
    return data


def _parse_block(data, header, entry, writer):
    '''Read *data* (whole lines) into *writer*; count what is not a run
    in *entry*; returns the lines read.'''
    text = data.decode(errors='replace')
    if columns.has_carriage_return(text):
        text = _csv_lines(text)
    frame, lines, dry_runs, skipped = columns.parse_block(text, header)
    writer.add(entry, frame, header)
    entry.dry_run += dry_runs
    for reason, count in skipped.items():
        entry.skipped[reason] = entry.skipped.get(reason, 0) + count
    entry.lines += lines
    return lines


def _csv_lines(text):
    '''*text* with the line ends the csv reader sees (a ``\\r`` ends a
    line too) made newlines: its rows, ``|``-joined.'''
    return ''.join('|'.join(row) + '\n' for row in history.perflog_rows(text))


@contextlib.contextmanager
def open_store(source, warn=None):
    '''The up-to-date :class:`Store` of the perflogs at *source* (locked
    while in use), or None where stores are off (:data:`STORE_ENV`) or
    cannot be kept (an unwritable directory). A missing, stale or older
    store is rebuilt without a word; an unreadable one with one line to
    *warn* (default: stderr).'''
    root = store_root()
    if root is None:
        yield None
        return
    directory = store_dir(root, source)
    try:
        os.makedirs(directory, exist_ok=True)
        lock = open(os.path.join(directory, 'lock'), 'w')
    except OSError as err:
        if settings.env(STORE_ENV):     # named by the user: say so
            _refuse(root, err.strerror or str(err))
        yield None                      # the default: read line by line
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        store = Store(directory, source)
        try:
            loaded = store.load()
        except StoreError as err:
            (warn or _stderr)(f'hpcml: the history store {directory} could '
                              f'not be read ({err}): rebuilt from the '
                              f'perflogs')
            loaded = False
        if not loaded:
            store.reset()
        try:
            store.update()
        except OSError:
            yield None
            return
        yield store


def _stderr(line):
    print(line, file=sys.stderr)
