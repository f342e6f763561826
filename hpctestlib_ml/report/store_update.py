"""Bringing a history store (:mod:`.store`) up to date: the lines its
perflogs gained since it was last read, parsed in blocks
(:func:`.perflog_columns.parse_block`) into new parts
(:mod:`.store_parts`), and the parts merged once :data:`FANOUT` of one
size have piled up (:func:`merge`).
"""
import dataclasses
import hashlib
import json
import math
import os

import polars as pl

from hpctestlib_ml.report import history
from hpctestlib_ml.report import perflog_columns as columns
from hpctestlib_ml.report import store_parts

#: Rows written to one Parquet file at most while reading (bounds memory).
CHUNK_ROWS = 100_000
#: Bytes of a perflog read at a time.
CHUNK_BYTES = 8 << 20
#: Parts of one size class merged into one (:func:`merge`).
FANOUT = 8


#: Perflogs up to this size are checked whole when modified (an edit in
#: place that keeps the size is seen); larger ones by their last bytes
#: read (hashing 64 MiB takes about 0.1 s).
VERIFY_MAX = 64 * 2 ** 20


def _digest(data):
    return hashlib.sha1(data).hexdigest()


@dataclasses.dataclass
class Entry:
    '''What the store read of one perflog file (kept in its manifest).'''
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
    mtime_ns: int = 0       # its modification time when last read
    whole: str = ''         # digest of all the bytes read ('' past
    #                         VERIFY_MAX, or not yet taken)


def update(store):
    '''Read what the perflogs of *store* (a :class:`.store.Store`) gained
    since the last update into new parts: new lines of files that grew,
    every line of new and replaced files; follow files that were renamed
    (logrotate's ``C.log`` -> ``C.log.1`` -> ``C.log.2``, ReFrame's
    ``.h0``: :func:`_follow_renames`); forget files that are gone; leave
    out, in :attr:`~.store.Store.unreadable`, files that cannot be read;
    merge the parts (:func:`merge`). Returns the lines read; the caller
    saves the manifest.'''
    files = (history.perflog_files(store.source)
             if os.path.isdir(store.source) else [store.source])
    writer = _PartWriter(store)
    read = 0
    known = store.manifest['files']
    _follow_renames(known, files)
    try:
        for path in files:
            try:
                read += _update_file(store, path, known.get(path), writer)
            except FileNotFoundError:
                known.pop(path, None)
            except history.UnreadablePerflog as err:
                known.pop(path, None)
                store.unreadable[err.path] = err.why
            except history.READ_ERRORS as err:
                known.pop(path, None)
                unreadable = history.cannot_read(path, err)
                store.unreadable[unreadable.path] = unreadable.why
        writer.flush()
    except _WriteFailed as failed:      # the store's error, not the file's
        raise failed.__cause__ from None
    merge(store)
    return read


class _WriteFailed(Exception):
    '''A part that could not be written (its error the cause), told apart
    from a perflog that cannot be read while that is read.'''


def _follow_renames(known, files):
    '''*known* (path -> :class:`Entry`) made the entries of *files*: an
    entry whose file is now at another path (the same inode: renamed, as
    logrotate rotates ``C.log`` to ``C.log.1`` and ``C.log.1`` to
    ``C.log.2``) moves with it, so that its lines are not read again
    (:func:`_unchanged_prefix` still checks them); the entries of files
    that are gone are forgotten.'''
    inodes = {}
    for path in files:
        try:
            inodes[path] = os.stat(path).st_ino
        except OSError:
            pass
    kept = {p: e for p, e in known.items() if inodes.get(p) == e.inode}
    moved = {e.inode: e for p, e in known.items() if p not in kept}
    for path in files:
        if path in kept:
            continue
        if inodes.get(path) in moved:
            kept[path] = moved.pop(inodes[path])
    known.clear()
    known.update(kept)


def _unchanged_prefix(path, entry, stat):
    '''Whether the bytes *entry* read are still the start of *path*: its
    inode, header and last bytes read; and, where the file was modified
    since (an append, or an edit in place that keeps its size, as an
    editor, ``dd conv=notrunc`` or Python's ``r+`` make), all the bytes
    read, up to :data:`VERIFY_MAX`. A file whose last line had no
    newline (cut while written?) is read again once it grows; a ``.gz``
    is read whole or not at all.'''
    if entry is None or entry.inode != stat.st_ino or \
            stat.st_size < entry.consumed:
        return False
    if (history.is_gzip(path) or not entry.clean_end) and \
            stat.st_size != entry.consumed:
        return False
    if history.is_gzip(path):
        return (stat.st_mtime_ns == entry.mtime_ns or
                entry.consumed > VERIFY_MAX or
                _whole_digest(path, entry.consumed) == entry.whole)
    with open(path, 'rb') as fp:
        header = fp.readline(history.MAX_LINE + 2)
        if header.decode(errors='replace').rstrip('\r\n') != entry.header:
            return False
        if _tail_digest(fp, len(header), entry.consumed) != entry.tail:
            return False
        if stat.st_mtime_ns == entry.mtime_ns or \
                entry.consumed > VERIFY_MAX:
            return True
        return _prefix_digest(fp, entry.consumed) == entry.whole


def _tail_digest(fp, header_size, end):
    '''The digest of the last bytes before *end* of open file *fp*, after
    its header (*header_size* bytes).'''
    start = max(header_size, end - 256)
    fp.seek(start)
    return _digest(fp.read(max(0, end - start)))


def _whole_digest(path, size):
    '''The digest of the first *size* bytes of *path*.'''
    with open(path, 'rb') as fp:
        return _prefix_digest(fp, size)


def _prefix_digest(fp, size):
    '''The digest of the first *size* bytes of open file *fp*.'''
    fp.seek(0)
    hashed, left = hashlib.sha1(), size
    while left:
        block = fp.read(min(CHUNK_BYTES, left))
        if not block:
            break
        hashed.update(block)
        left -= len(block)
    return hashed.hexdigest()


def _update_file(store, path, entry, writer):
    stat = os.stat(path)
    if not _unchanged_prefix(path, entry, stat):
        entry = None
    if entry is not None and stat.st_size == entry.consumed:
        entry.mtime_ns = stat.st_mtime_ns
        return 0
    if entry is None:
        entry = Entry(store.manifest['next_fid'], stat.st_ino, 0, 0, '',
                      '', True)
        store.manifest['next_fid'] += 1
        store.manifest['files'][path] = entry
    if history.is_gzip(path):
        read = _read_gzip(path, entry, writer, stat)
    else:
        read = _read_file(path, entry, writer)
    # The time before reading: a line appended meanwhile makes the next
    # update verify again, never skip it.
    entry.mtime_ns = stat.st_mtime_ns
    if entry.consumed <= VERIFY_MAX:
        entry.whole = _whole_digest(path, entry.consumed)
    return read


def merge(store):
    '''Merge :data:`FANOUT` parts of *store* of one size class (rows, in
    powers of FANOUT) into one while there are as many, the smallest
    class first: each row is rewritten about log_FANOUT(rows) times over
    the store's life, and an update writes in proportion to its new
    lines. The parts of a class need not be neighbours (a query orders
    rows by file and line, never by part): an update's last, smaller part
    sits between larger ones and would otherwise stop every merge (a
    first build of 10.95 million lines left 92 parts).'''
    parts = store.manifest['parts']

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
        parts.append(_rewrite(store, merged))


def _rewrite(store, merged):
    '''One part of the live rows of *merged*, streamed (the merged
    parts are never in memory whole).'''
    days_name = store_parts.days_name
    frame = (pl.concat([pl.scan_parquet(store.path(p['name']))
                        for p in merged], how='diagonal_relaxed')
             .filter(pl.col('fid').is_in(store.live_fids)))
    name = store.new_part_name()
    path = store.path(name)
    frame.sink_parquet(f'{path}.partial',
                       row_group_size=store_parts.ROW_GROUP)
    os.replace(f'{path}.partial', path)
    days = (pl.concat([pl.scan_parquet(store.path(days_name(p['name'])))
                       for p in merged], how='diagonal_relaxed')
            .filter(pl.col('fid').is_in(store.live_fids)))
    store_parts.write_part(
        store_parts.combine_days(days, store_parts.DAY_KEYS).collect(),
        store.path(days_name(name)))
    for part in merged:         # removed once the manifest is saved
        store.obsolete += [part['name'], days_name(part['name'])]
    rows = pl.scan_parquet(path).select(pl.len()).collect().item()
    return {'name': name, 'rows': rows}


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
        keys = {name: [] for name in store_parts.KEY_COLUMNS}
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
            pl.Series(name, values, dtype=store_parts.KEY_COLUMNS[name])
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
        name = self.store.new_part_name()
        try:
            store_parts.write_part(frame, self.store.path(name))
            store_parts.write_part(
                store_parts.day_counts(frame.lazy()).collect(),
                self.store.path(store_parts.days_name(name)))
        except (OSError, pl.exceptions.PolarsError) as err:
            raise _WriteFailed() from err
        self.store.manifest['parts'].append({'name': name,
                                             'rows': frame.height})
        self.frames, self.rows = [], 0


def _workload(run):
    try:
        return run.workload
    except IndexError:              # no workload parameter, no name
        return ''


def _read_file(path, entry, writer):
    '''Parse *path* from where *entry* stopped into *writer*'s parts;
    update *entry*; returns the lines read.'''
    with open(path, 'rb') as fp:
        if entry.consumed == 0 and not _read_header(fp, path, entry):
            return 0
        fp.seek(0)
        header_size = len(fp.readline(history.MAX_LINE + 2))
        fp.seek(entry.consumed)
        read = _read_lines(fp, entry, writer)
        entry.tail = _tail_digest(fp, header_size, entry.consumed)
    return read


def _read_gzip(path, entry, writer, stat):
    '''Parse compressed *path* whole (logrotate's ``C.log.2.gz``, never
    appended to) into *writer*'s parts; *entry* then holds its
    compressed size (*stat*), what :func:`_unchanged_prefix` checks.'''
    with history.open_perflog(path, binary=True) as fp:
        read = (_read_lines(fp, entry, writer)
                if _read_header(fp, path, entry) else 0)
    entry.consumed, entry.clean_end, entry.tail = stat.st_size, True, ''
    return read


def _read_header(fp, path, entry):
    '''The first line of *fp* read into *entry*; False where there is
    none; :class:`~.history.UnreadablePerflog` where it is longer than
    :data:`~.history.MAX_LINE` (not a perflog).'''
    first = fp.readline(history.MAX_LINE + 2)
    if not first:
        return False
    if len(first.rstrip(b'\r\n')) > history.MAX_LINE:
        raise history.not_a_perflog(path)
    entry.header = first.decode(errors='replace').rstrip('\r\n')
    entry.consumed = len(first)
    entry.clean_end = first.endswith(b'\n')
    return bool(next(history.perflog_rows(entry.header + '\n'), None))


def _read_lines(fp, entry, writer):
    '''Parse the lines of *fp*, from where it stands, into *writer*'s
    parts, :data:`CHUNK_BYTES` at a time; a line longer than
    :data:`~.history.MAX_LINE` is read past, skipped and counted, as the
    line reader does (:func:`.history.bounded_lines`); returns the lines
    read.'''
    header = next(history.perflog_rows(entry.header + '\n'), None)
    if not header:
        return 0
    parser = columns.Header(header)
    read, pending, skipping, start = 0, b'', False, entry.consumed
    while True:
        block = fp.read(CHUNK_BYTES)
        if not block:
            break
        if skipping:                # the rest of a line over MAX_LINE
            end = block.find(b'\n') + 1
            entry.consumed += end or len(block)
            if not end:
                continue
            block, skipping = block[end:], False
        data = pending + block
        end = data.rfind(b'\n') + 1
        pending = data[end:]
        if end:
            read += _parse_block(data[:end], parser, entry, writer)
            entry.consumed += end
        if len(pending) > history.MAX_LINE + 1:
            entry.consumed += len(pending)
            entry.skipped['huge'] = entry.skipped.get('huge', 0) + 1
            entry.lines += 1
            read += 1
            pending, skipping = b'', True
    if pending:
        # A last line without its newline (a session killed while
        # writing): read as the line-by-line reader reads it; the file
        # is read again from its start once it grows.
        read += _parse_block(pending, parser, entry, writer)
        entry.consumed += len(pending)
    if entry.consumed > start:
        entry.clean_end = not (pending or skipping)
    return read


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
