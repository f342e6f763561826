"""``hpcml changes FILE.csv...``: the report's change detector
(:mod:`hpctestlib_ml.report.changes`, the same code and settings) on
series from anywhere: a CSV file with a header row, an optional ``time``
column (Unix seconds or ISO 8601 dates), every other numeric column a
series (or the ``--column`` named). One JSON object a line per event:
``file``, ``column``, ``index`` (0-based data row of the first run after
a change, or of the odd run), ``time``, ``kind`` (shift, noise, outlier,
silent), ``effect`` (after / before - 1: a relative change of the
values; for ``noise`` of their spread), ``low``, ``high`` (its 95 %
interval), ``p``, ``direction`` (``slower`` or ``faster`` in the metric's
direction: higher is better unless ``--lower-is-better``), ``flagged``
(a shift significant and at least ``--min-change``) and ``detail``.

A file that cannot be read is refused in one line naming the file and
the row (exit status 2); the others are still judged.
"""
import csv
import datetime
import json
import math
import sys
import time

from hpctestlib_ml import changes

#: The command's line in ``hpcml --help``.
HELP = ('the change detector of hpcml report on series from CSV files '
        '(shifts, changes of spread, outliers, silences)')

#: The column that holds each row's time.
TIME_COLUMN = 'time'


class CsvError(Exception):
    '''A file that cannot be judged; the message names the file and row.'''


def add_arguments(parser):
    parser.add_argument('files', nargs='+', metavar='FILE.csv',
                        help='CSV files with a header row')
    parser.add_argument('--column', action='append', metavar='NAME',
                        help='judge only this column (repeatable); default: '
                             'every numeric column but time')
    parser.add_argument('--lower-is-better', action='store_true',
                        help='a rise is a slowdown (step time, energy); '
                             'default: higher is better (throughput)')
    parser.add_argument('--min-change', type=_percent, default=None,
                        metavar='PCT',
                        help='smallest shift flagged, in percent (default '
                             f'{100 * changes.MIN_CHANGE:g})')
    parser.add_argument('--now', type=_moment, default=None,
                        metavar='TIME',
                        help='the time a silence is judged at (Unix seconds '
                             'or ISO 8601; default: now, where the file has '
                             'a time column)')


def _percent(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < 100:
        raise _argument_error(f'a percentage in [0, 100), got {text!r}')
    return value / 100


def _moment(text):
    value = parse_time(text)
    if value is None:
        raise _argument_error(f'Unix seconds or an ISO 8601 date, got '
                              f'{text!r}')
    return value


def _argument_error(message):
    import argparse
    return argparse.ArgumentTypeError(message)


def parse_time(text):
    '''Unix seconds of *text* (a number, or an ISO 8601 date or time, UTC
    where it names no zone), else None.'''
    text = text.strip()
    try:
        value = float(text)
        return value if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def _number(text):
    try:
        value = float(text)
    except ValueError:
        return None
    return value


def read_series(path, wanted=None):
    '''(times or None, {column: [(data row, value)]}) of CSV file *path*;
    raises :class:`CsvError` naming the file and row of what is wrong.'''
    try:
        with open(path, newline='', encoding='utf-8', errors='replace') as f:
            rows = list(csv.reader(f))
    except OSError as err:
        raise CsvError(f'{path}: cannot read: {err.strerror}') from None
    except csv.Error as err:
        raise CsvError(f'{path}: not CSV: {err}') from None
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise CsvError(f'{path}: empty: a header row and one row a run '
                       f'are needed')
    header = [cell.strip() for cell in rows[0]]
    if len(set(header)) != len(header):
        twice = sorted({h for h in header if header.count(h) > 1})
        raise CsvError(f'{path}: row 1: column {twice[0]!r} named twice')
    body = [r for r in rows[1:] if any(cell.strip() for cell in r)]
    for number, row in enumerate(rows[1:], start=2):
        if any(cell.strip() for cell in row) and len(row) != len(header):
            raise CsvError(f'{path}: row {number}: {len(row)} cells under '
                           f'a header of {len(header)}')
    for name in wanted or ():
        if name not in header:
            raise CsvError(f'{path}: no column {name!r} (columns: '
                           f'{", ".join(header)})')
    row_numbers = [n for n, r in enumerate(rows[1:], start=2)
                   if any(cell.strip() for cell in r)]
    times = None
    if TIME_COLUMN in header:
        at = header.index(TIME_COLUMN)
        times = []
        for number, row in zip(row_numbers, body):
            value = parse_time(row[at])
            if value is None:
                raise CsvError(f'{path}: row {number}: time {row[at]!r} is '
                               f'neither Unix seconds nor an ISO 8601 date')
            if times and value < times[-1]:
                raise CsvError(f'{path}: row {number}: time goes back '
                               f'({row[at]}): sort the rows by time')
            times.append(value)
    series = {}
    for at, name in enumerate(header):
        if name == TIME_COLUMN or (wanted and name not in wanted):
            continue
        cells = [(n, r[at].strip()) for n, r in zip(row_numbers, body)]
        numbers = [(n, _number(c)) for n, c in cells if c]
        if not wanted and not any(v is not None for _, v in numbers):
            continue                # a column of names, not a series
        for n, value in numbers:
            if value is None or not math.isfinite(value):
                cell = dict(cells)[n]
                raise CsvError(f'{path}: row {n}: column {name!r}: {cell!r} '
                               f'is not a finite number')
        series[name] = [(n - 2, v) for n, v in numbers]
    if not series:
        raise CsvError(f'{path}: no numeric column besides {TIME_COLUMN!r}')
    return times, series


def _iso(seconds):
    return datetime.datetime.fromtimestamp(
        seconds, datetime.timezone.utc).isoformat().replace('+00:00', 'Z')


def _finite(value):
    return None if value is None or not math.isfinite(value) else value


def judge(path, column, rows, times, higher_is_better, min_change, now):
    '''The events of one column (*rows*: (data row, value)) as dicts.'''
    values = [v for _, v in rows]
    at = [times[i] for i, _ in rows] if times else None
    settings = {} if min_change is None else {'min_change': min_change}
    found = changes.events(values, at, higher_is_better,
                           now=now if times else None, **settings)
    out = []
    for event in found:
        silent = event.kind == 'silent'
        row = len(times or values) if silent else rows[event.index][0]
        out.append({
            'file': path, 'column': column, 'index': row,
            'time': _iso(event.when) if times else None,
            'kind': event.kind, 'effect': _finite(event.effect),
            'low': _finite(event.low), 'high': _finite(event.high),
            'p': event.p_value,
            'direction': (None if event.worse is None or event.kind == 'noise'
                          else 'slower' if event.worse else 'faster'),
            'flagged': event.flagged, 'detail': event.detail})
    return out


def run(args, out=print):
    '''``hpcml changes``; 0 where every file was judged, 2 where one was
    refused (named on stderr).'''
    status = 0
    for path in args.files:
        try:
            times, series = read_series(path, args.column)
        except CsvError as err:
            print(f'hpcml changes: {err}', file=sys.stderr)
            status = 2
            continue
        now = args.now if args.now is not None else time.time()
        for column, rows in series.items():
            for event in judge(path, column, rows, times,
                               not args.lower_is_better, args.min_change,
                               now):
                out(json.dumps(event))
    return status
