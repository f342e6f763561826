"""A results history: one :class:`Run` per test case run, read from the
suite's perflogs (by header field name, any header generation) or from
ReFrame's results database.

Perflogs: ``|``-separated with a header line. When the header changes
(a new field, a new performance variable) ReFrame moves the old file to
``<name>.log.h0``, ``.h1``, ...; every generation is read by its own header.
Files rotated by logrotate are read too (:func:`is_perflog`): ``.log.1``,
``.log-20261128``, and compressed, ``.log.2.gz``.
Lines from ``reframe --dry-run`` (result ``pass``, every value ``None``) are
not results: they are counted in :attr:`History.dry_run_lines` and left out.
"""
import csv
import dataclasses
import datetime
import glob
import gzip
import io
import json
import os
import re
import sqlite3
import zlib

from hpctestlib_ml import perflog_fields

#: Test parameters that identify a case beside its display name.
CASE_FIELDS = perflog_fields.names(perflog_fields.CASE)

#: Fields of a run's result beside its figures: the first logged losses,
#: the slowest rank beyond the noise, the partition's noise floor and the
#: ReFrame session it came from (absent from older perflogs: '').
RESULT_FIELDS = perflog_fields.names(perflog_fields.RESULT)

_METRIC_COLUMN = re.compile(r'^(?P<name>.+)_(?P<part>value|unit|ref|'
                            r'lower_thres|upper_thres)$')
_EMPTY = ('', 'None', 'null', 'nan')


def case_name(display_name):
    '''*display_name* without the parameters ReFrame adds itself, which
    are ``.``-prefixed (``%.repeat_no=3`` of ``--repeat``, ``%.part`` and
    ``%.nid`` of ``--distribute``): they number runs of one case, so the
    five runs of ``reframe --repeat 5`` are one case's five runs.'''
    return ' %'.join(part for part in display_name.split(' %')
                     if not part.startswith('.'))


@dataclasses.dataclass
class Metric:
    value: float
    unit: str = ''
    ref: float = 0.0
    lower: float = None
    upper: float = None


@dataclasses.dataclass
class Run:
    time: float                         # Unix seconds, job completion
    system: str
    partition: str
    display_name: str
    result: str                         # pass | fail
    params: dict                        # CASE_FIELDS and provenance
    metrics: dict                       # name -> Metric
    session: str = ''                   # results-DB session UUID

    @property
    def where(self):
        return f'{self.system}:{self.partition}'

    @property
    def workload(self):
        return self.params.get('workload') or self.display_name.split()[0]

    @property
    def name(self):
        '''The test case's name: :attr:`display_name` without ReFrame's
        own parameters (:func:`case_name`).'''
        return case_name(self.display_name)

    @property
    def check(self):
        '''The test class.'''
        return self.display_name.split()[0]

    @property
    def node(self):
        '''The one node the run ran on, or None (several, or unknown):
        ``job_nodelist`` (``n1,n2`` in perflogs, ``n[1-2]`` in the results
        DB: several), else ``--distribute``'s ``.nid`` in the name.'''
        listed = (self.params.get('job_nodelist') or '').strip()
        if listed in ('', 'None', 'null', '[]'):
            match = re.search(r' %\.nid=(\S+)', self.display_name)
            listed = match[1] if match else ''
        if not listed or re.search(r'[,\[\s]', listed):
            return None
        return listed

    @property
    def case(self):
        '''What a case is, independent of the system it ran on: the runs
        a baseline's score and a comparison of two systems set side by
        side (``reference_case`` would part them: its layout is each
        partition's).'''
        return (self.workload, self.name,
                self.params.get('resolved_size', ''))

    @property
    def case_here(self):
        '''What a case is on its ``system:partition``: the runs one
        median, one change and one reference pool (the report's table,
        its change detection, ``hpcml references``). With
        ``reference_case`` logged, the test class, the partition and that
        case: it is what the check names its reference by, and holds
        size, layout, launch mode, batch, precision and the test's own
        parameters. Older results, without it, are told apart by name and
        size.'''
        reference_case = self.params.get('reference_case')
        if reference_case:
            return (self.workload, self.where, self.check, reference_case)
        return (self.workload, self.where, self.name,
                self.params.get('resolved_size', ''))

    def param_int(self, name, default=1):
        try:
            return int(self.params.get(name))
        except (TypeError, ValueError):
            return default


@dataclasses.dataclass
class History:
    runs: list = dataclasses.field(default_factory=list)
    dry_run_lines: int = 0
    files: list = dataclasses.field(default_factory=list)
    #: Why lines were skipped: reason -> count (see :data:`SKIP_REASONS`).
    skipped: dict = dataclasses.field(default_factory=dict)
    #: Perflogs that could not be read, left out: path -> why, with the
    #: fix (:class:`UnreadablePerflog`).
    unreadable_files: dict = dataclasses.field(default_factory=dict)

    @property
    def unreadable_lines(self):
        return sum(self.skipped.values())

    def extend(self, other):
        self.runs += other.runs
        self.dry_run_lines += other.dry_run_lines
        self.files += other.files
        for reason, count in other.skipped.items():
            self.skip(reason, count)
        self.unreadable_files.update(other.unreadable_files)

    def add(self, parsed):
        '''A parsed row (:meth:`RowParser.parse`): a run, a dry-run line
        or a skipped one.'''
        if parsed == 'dry-run':
            self.dry_run_lines += 1
        elif isinstance(parsed, str):
            self.skip(parsed)
        else:
            self.runs.append(parsed)

    def skip(self, reason, count=1):
        self.skipped[reason] = self.skipped.get(reason, 0) + count

    def skipped_text(self):
        '''``N unreadable lines (a truncated, b ...)``.'''
        if not self.unreadable_lines:
            return '0 unreadable lines'
        reasons = ', '.join(f'{n} {SKIP_REASONS[r]}' for r, n in
                            sorted(self.skipped.items()))
        return f'{self.unreadable_lines} unreadable lines skipped ({reasons})'

    def unreadable_lines_of_files(self, command):
        '''One line per perflog left out (:attr:`unreadable_files`), as
        ``hpcml COMMAND: skipped PATH: why: fix``.'''
        return [f'hpcml {command}: skipped {path}: {why}'
                for path, why in sorted(self.unreadable_files.items())]

    def nothing_read(self):
        '''Why no run was read, with the fix, for a history of no runs:
        its unreadable lines and what to do about the commonest reason,
        else that it holds dry-run lines at most.'''
        files = ', '.join(self.files) or 'the input'
        if self.unreadable_files and not self.files:
            return (f'no perflog could be read ({len(self.unreadable_files)} '
                    f'left out, each named above with its fix)')
        if self.unreadable_lines:
            commonest = max(self.skipped, key=self.skipped.get)
            return (f'no readable results in {files}: '
                    f'{self.skipped_text()}: {SKIP_FIXES[commonest]}')
        return (f'no results in {files} ({self.dry_run_lines} dry-run lines, '
                f'which carry no values): run the suite with -r first')


#: The longest perflog line read (bytes, or characters by the line
#: reader, without its line end): a line is a few kB (its longest field,
#: ``loss_curve``, holds a few dozen numbers). A longer one (a crash's NUL
#: bytes, a file that is no perflog) is read past in bounded memory,
#: skipped and counted; a file whose first line is longer is left out
#: (:class:`UnreadablePerflog`). Without a bound, 2 GB of NUL bytes with
#: no newline took every report down with a MemoryError (issue 39).
MAX_LINE = 1 << 20

#: Why a perflog line is skipped, as the report says it.
SKIP_REASONS = {
    'short': 'cut short: fewer fields than their header (a session killed '
             'while writing, or a full disk)',
    'long': 'with more fields than their header (written by another '
            'version of the suite or ReFrame into this file?)',
    'time': 'without a readable job_completion_time',
    'huge': f'over {MAX_LINE >> 20} MiB long (NUL bytes a crash left, or '
            f'not a perflog?)',
}

#: What to do where no line of a file could be read, by why most were
#: skipped (:data:`SKIP_REASONS`).
SKIP_FIXES = {
    'short': 'every line was cut short: the file is damaged; move it aside '
             '(the next run starts a new one)',
    'long': 'give the file back the header (first line) its lines were '
            'written with, or move it aside (the next run starts a new one)',
    'time': "is it a perflog? (ReFrame's perflogs are '|'-separated lines "
            "under a header line; hpcml extract and hpcml triage read a "
            "job's output)",
    'huge': 'every line is over 1 MiB long: move the file out of the '
            'perflog directory (a perflog line is a few kB)',
}


def _number(text):
    if text is None or text.strip() in _EMPTY:
        return None
    try:
        return float(text)
    except ValueError:
        return None


_SECONDS = re.compile(r'\d+(\.\d*)?')
_OFFSET = re.compile(r'([+-]\d\d)(\d\d)$')


def parse_time(text):
    '''Unix seconds of an ISO 8601 time (ReFrame's ``%Y-%m-%dT%H:%M:%S%z``).'''
    text = text.strip()
    if _SECONDS.fullmatch(text):
        return float(text)
    try:                # Python 3.11 reads ReFrame's +0000 itself
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        moment = datetime.datetime.fromisoformat(_OFFSET.sub(r'\1:\2', text))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def _plain(name):
    '''Field name of a header column: ``workload=workload`` -> workload,
    ``reframe version`` -> version.'''
    name = name.split('=', 1)[-1].strip()
    return {'reframe version': 'version', 'check_result': 'result'}.get(
        name, name)


def _plain_value(header_name, value):
    # Old generations wrote 'key=value' into values where the header did.
    if '=' in header_name and '=' in value:
        return value.split('=', 1)[1]
    return value


class RowParser:
    '''The rows of one perflog header generation: :meth:`parse` makes a
    :class:`Run`, ``'dry-run'`` or the reason a row is skipped
    (:data:`SKIP_REASONS`) of each row, as :func:`read_perflog` and the
    history store (:mod:`.store`) read them.'''

    def __init__(self, header):
        self.header = header
        names = [_plain(h) for h in header]
        self.metric_columns = {}
        for i, name in enumerate(names):
            match = _METRIC_COLUMN.match(name)
            if match:
                self.metric_columns.setdefault(match['name'],
                                               {})[match['part']] = i
        self.index = {name: i for i, name in enumerate(names)}
        self.keyed = any('=' in h for h in header)

    def parse(self, row):
        if len(row) != len(self.header):
            return 'short' if len(row) < len(self.header) else 'long'
        if self.keyed:
            row = [_plain_value(h, v) for h, v in zip(self.header, row)]
        run = _run_from_row(row, self.index, self.metric_columns)
        return 'time' if run is None else run


#: A perflog field has no length limit of its own (a loss curve, the
#: framework versions); csv's default of 128 KiB made a file with a longer
#: line (a job's output given by mistake) a traceback, not a file whose
#: lines are skipped and said so.
csv.field_size_limit(2 ** 31 - 1)


def perflog_rows(text):
    '''The rows of perflog *text* (whole lines), as ReFrame wrote them.'''
    return csv.reader(io.StringIO(text, newline=''), delimiter='|',
                      quoting=csv.QUOTE_NONE)


class UnreadablePerflog(Exception):
    '''A perflog that cannot be read: left out of the history, said in
    one line (its path, why, and the fix; :attr:`History.unreadable_files`),
    every other file read.'''

    def __init__(self, path, why):
        super().__init__(why)
        self.path = str(path)
        self.why = why


def not_a_perflog(path):
    ''':class:`UnreadablePerflog` for *path*, whose first line is longer
    than :data:`MAX_LINE`.'''
    return UnreadablePerflog(
        path, f'its first line is over {MAX_LINE >> 20} MiB long (NUL bytes '
              f'a crash left?), so it is not a perflog: move it out of the '
              f'perflog directory')


def cannot_read(path, err):
    ''':class:`UnreadablePerflog` for *path*, which gave *err* (an
    ``OSError`` or a damaged ``.gz``) when read.'''
    why = getattr(err, 'strerror', None) or str(err) or type(err).__name__
    if is_gzip(path) and not isinstance(err, PermissionError):
        return UnreadablePerflog(
            path, f'not a readable gzip file ({why}): move it out of the '
                  f'perflog directory (zcat shows what can still be read)')
    return UnreadablePerflog(
        path, f'cannot read it ({why}): let this user read it, or move it '
              f'out of the perflog directory')


#: What reading a perflog can raise that makes it unreadable (a damaged
#: ``.gz``: ``gzip.BadGzipFile`` is an ``OSError``; cut short: EOFError).
READ_ERRORS = (OSError, EOFError, zlib.error)


def is_gzip(path):
    '''Whether perflog *path* is compressed (logrotate's ``compress``).'''
    return str(path).endswith('.gz')


def open_perflog(path, binary=False):
    '''*path* opened for reading, decompressed where it is a ``.gz``;
    as text, with the csv reader's line ends and undecodable bytes
    replaced.'''
    if is_gzip(path):
        return (gzip.open(path, 'rb') if binary else
                gzip.open(path, 'rt', newline='', errors='replace'))
    return (open(path, 'rb') if binary else
            open(path, newline='', errors='replace'))


def bounded_lines(fp, history):
    '''The lines of text file *fp*, each at most :data:`MAX_LINE`
    characters long (without its line end): a longer one is read past in
    pieces and counted in *history* (:data:`SKIP_REASONS` ``huge``).'''
    limit = MAX_LINE + 2
    while True:
        line = fp.readline(limit)
        if not line:
            return
        if len(line.rstrip('\r\n')) <= MAX_LINE:
            yield line
            continue
        while line and not line.endswith(('\n', '\r')):
            line = fp.readline(1 << 20)
        history.skip('huge')


def read_perflog(path):
    '''A :class:`History` of one perflog file; one that cannot be read
    (:class:`UnreadablePerflog`) is in its ``unreadable_files``, with no
    runs.'''
    history = History(files=[str(path)])
    try:
        _read_rows(path, history)
    except UnreadablePerflog as err:
        return History(unreadable_files={err.path: err.why})
    except READ_ERRORS as err:
        unreadable = cannot_read(path, err)
        return History(unreadable_files={unreadable.path: unreadable.why})
    return history


def _read_rows(path, history):
    with open_perflog(path) as fp:
        first = fp.readline(MAX_LINE + 2)
        if len(first.rstrip('\r\n')) > MAX_LINE:
            raise not_a_perflog(path)
        header = next(perflog_rows(first), None)
        if not header:
            return
        parser = RowParser(header)
        reader = csv.reader(bounded_lines(fp, history), delimiter='|',
                            quoting=csv.QUOTE_NONE)
        for row in reader:
            history.add(parser.parse(row))


def _run_from_row(row, index, metric_columns):
    def field(name, default=''):
        i = index.get(name)
        return row[i] if i is not None else default

    try:
        when = parse_time(field('job_completion_time'))
    except ValueError:
        return None
    system, partition = field('system'), field('partition')
    if not partition and ':' in field('system:partition'):
        system, partition = field('system:partition').split(':', 1)
    metrics = {}
    for name, parts in metric_columns.items():
        value = _number(row[parts['value']]) if 'value' in parts else None
        if value is None:
            continue
        get = (lambda p: row[parts[p]] if p in parts else None)
        metrics[name] = Metric(value, get('unit') or '',
                               _number(get('ref')) or 0.0,
                               _number(get('lower_thres')),
                               _number(get('upper_thres')))
    result = field('result', 'pass') or 'pass'
    if not metrics and result == 'pass':
        return 'dry-run'
    params = {name: row[i] for name, i in index.items()
              if name in _KEPT_FIELDS}
    return Run(when, system, partition, field('display_name'), result,
               params, metrics)


#: Provenance fields kept with each run (hpctestlib_ml.perflog_fields).
PROVENANCE_FIELDS = perflog_fields.names(perflog_fields.PROVENANCE)
#: The fields a :class:`Run` keeps in its ``params``.
_KEPT_FIELDS = frozenset(CASE_FIELDS + PROVENANCE_FIELDS + RESULT_FIELDS)


#: A perflog's name: ``C.log``, its header generations (``.h0``: ReFrame
#: moves a file whose header changed), and logrotate's names for rotated
#: copies of either: ``.1`` or, with ``dateext``, ``-20261128``, and
#: ``.gz`` with ``compress`` (without ``delaycompress``, ``C.log.1.gz``).
PERFLOG_NAME = re.compile(r'\.log(\.h\d+)?(\.\d+|-\d{8}(\d\d)?)?(\.gz)?$')


def is_perflog(path):
    '''Whether *path* is named as a perflog (:data:`PERFLOG_NAME`).'''
    return bool(PERFLOG_NAME.search(os.path.basename(str(path))))


def perflog_files(directory):
    '''Every perflog under *directory*, all header generations and
    rotated copies (:data:`PERFLOG_NAME`).'''
    pattern = os.path.join(directory, '**', '*.log*')
    return sorted(p for p in glob.glob(pattern, recursive=True)
                  if is_perflog(p) and os.path.isfile(p))


def distinct_sources(paths):
    '''*paths* (perflog files and directories), each read once: the same
    path written twice (``D`` and ``D/``, a link to it) once, and a path
    inside a directory also given left to that directory, in the order
    given. ``--perflogs D D/`` locked the history store twice and waited
    on itself; ``--perflogs D D/x/C.log`` counted C's runs twice.'''
    real = [os.path.realpath(p) for p in paths]
    kept = []
    for path, resolved in zip(paths, real):
        inside = any(other != resolved and os.path.isdir(other) and
                     resolved.startswith(other.rstrip(os.sep) + os.sep)
                     for other in real)
        if not inside and resolved not in [r for _, r in kept]:
            kept.append((path, resolved))
    return [p for p, _ in kept]


def read_perflogs(paths):
    '''A :class:`History` of perflog files and directories of them, each
    read once (:func:`distinct_sources`).'''
    history = History()
    for path in distinct_sources(paths):
        files = perflog_files(path) if os.path.isdir(path) else [path]
        for name in files:
            history.extend(read_perflog(name))
    return history


def read_results_db(path):
    '''A :class:`History` of ReFrame's results database (``storage``): one
    run per stored test case, with its session's UUID.'''
    history = History(files=[str(path)])
    connection = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    try:
        blobs = connection.execute(
            'SELECT uuid, json_blob FROM sessions ORDER BY session_start_unix')
        for uuid, blob in blobs:
            report = json.loads(blob)
            for run in report.get('runs', []):
                for case in run.get('testcases', []):
                    parsed = _run_from_case(case, uuid)
                    if parsed == 'dry-run':
                        history.dry_run_lines += 1
                    elif parsed:
                        history.runs.append(parsed)
    finally:
        connection.close()
    return history


def _run_from_case(case, session):
    metrics = {}
    for key, values in (case.get('perfvalues') or {}).items():
        value, ref, lower, upper, unit = values[:5]
        if value is None:
            continue
        metrics[key.rsplit(':', 1)[-1]] = Metric(
            float(value), unit or '', float(ref or 0), lower, upper)
    result = case.get('result') or 'pass'
    if result not in ('pass', 'fail'):
        return None                     # skipped or aborted: not a run
    if not metrics and result == 'pass':
        return 'dry-run'
    params = {name: '' if case.get(name) is None else str(case.get(name))
              for name in CASE_FIELDS + PROVENANCE_FIELDS + RESULT_FIELDS
              if name in case}
    when = case.get('job_completion_time_unix') or 0.0
    return Run(float(when), case.get('system', ''), case.get('partition', ''),
               case.get('display_name', ''), result, params, metrics, session)
