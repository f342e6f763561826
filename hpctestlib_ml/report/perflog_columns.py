"""Perflog lines to columns, a block at a time (polars): what the history
store (:mod:`.store`) keeps of each line, read as
:class:`~.history.RowParser` reads it, at some 20 times its speed.

Of each line: whether it is a run, a dry-run line or skipped (and why),
its time, whether it passed, its figures, and the keys the report groups
by. The fields a key depends on (display name, system, partition, the
``workload``, ``resolved_size``, ``reference_case`` and ``job_nodelist``
parameters) take few distinct values: each distinct combination is made
into a :class:`~.history.Run` and asked for its keys, so that the keys
are the line reader's by construction. Times and numbers in the forms
ReFrame writes (``2026-11-25T03:00:00+0000``, ``1234.5``) are parsed
vectorised; any other text by the line reader's own functions.
"""
import polars as pl

from hpctestlib_ml import perflog_fields
from hpctestlib_ml.report import history

#: A time as ReFrame's perflog ``datefmt`` writes it.
_TIME = r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}$'
#: A number polars parses as Python does.
_NUMBER = r'^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$'
#: The parameters the keys depend on.
KEY_PARAMS = perflog_fields.report_keys()


class Header:
    '''One header generation: its columns' places.'''

    def __init__(self, header):
        self.width = len(header)
        self.parser = history.RowParser(header)
        self.keyed = [i for i, h in enumerate(header) if '=' in h]
        self.index = self.parser.index
        self.metrics = self.parser.metric_columns


def _numbers(column):
    '''*column* (strings) as floats, None where :func:`history._number`
    gives None.'''
    text = column.str.strip_chars()
    fast = text.str.contains(_NUMBER)
    values = text.cast(pl.Float64, strict=False)
    slow = (~fast & column.is_not_null()).arg_true()
    if len(slow):
        values = values.scatter(slow, [history._number(column[i])
                                       for i in slow.to_list()])
    return values


def _times(column):
    '''Unix seconds of *column*, None where the line reader cannot read
    the time (a skipped line).'''
    fast = column.str.contains(_TIME)
    seconds = (column.str.strptime(pl.Datetime('us', 'UTC'),
                                   '%Y-%m-%dT%H:%M:%S%z', strict=False)
               .dt.epoch('us').cast(pl.Float64) / 1e6)
    slow = (~fast | seconds.is_null()).arg_true()
    if len(slow):
        seconds = seconds.scatter(slow, [_time(column[i])
                                         for i in slow.to_list()])
    return seconds


def _time(text):
    try:
        return history.parse_time(text if text is not None else '')
    except ValueError:
        return None


def parse_block(text, header):
    '''The runs of perflog *text* (whole lines) under *header*
    (:class:`Header`): (a DataFrame of the runs: ``line`` (the line's
    number in the block), ``raw``, ``time``, ``ok``, the key fields and a
    ``v:<metric>`` column per figure; lines read; dry-run lines;
    {skip reason: lines}). A line over :data:`~.history.MAX_LINE` bytes
    is skipped, as the line reader skips it.'''
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    frame = pl.DataFrame({'raw': pl.Series(lines, dtype=pl.String)})
    frame = frame.with_row_index('line')
    skipped = {}
    huge = pl.col('raw').str.len_bytes() > history.MAX_LINE
    count = frame.filter(huge).height
    if count:
        skipped['huge'] = count
        frame = frame.filter(~huge)
    fields = pl.when(pl.col('raw') == '').then(0).otherwise(
        pl.col('raw').str.count_matches('|', literal=True) + 1)
    frame = frame.with_columns(fields.alias('fields'))
    short = frame.filter(pl.col('fields') < header.width).height
    long = frame.filter(pl.col('fields') > header.width).height
    if short:
        skipped['short'] = short
    if long:
        skipped['long'] = long
    frame = frame.filter(pl.col('fields') == header.width).drop('fields')
    parts = frame['raw'].str.split_exact('|', header.width - 1)
    column = {}

    def field(name):
        '''The column of header field *name* (plain values), or None.'''
        i = header.index.get(name)
        return None if i is None else _field_at(parts, header, i, column)

    times = _times(field('job_completion_time')
                   if 'job_completion_time' in header.index
                   else pl.Series([''] * frame.height))
    values = {}
    for name, places in header.metrics.items():
        if 'value' in places:
            i = places['value']
            values[f'v:{name}'] = _numbers(
                _field_at(parts, header, i, column))
    result = field('result')
    result = (pl.Series(['pass'] * frame.height) if result is None else
              result.fill_null('').replace('', 'pass'))
    data = {'line': frame['line'], 'raw': frame['raw'], 'time': times,
            'result': result}
    for name in ('display_name', 'system', 'partition', 'system:partition',
                 *KEY_PARAMS):
        got = field(name)
        data[f'f:{name}'] = got if got is not None else \
            pl.Series([None] * frame.height, dtype=pl.String)
    out = pl.DataFrame({**data, **values})
    bad_time = out.filter(pl.col('time').is_null()).height
    if bad_time:
        skipped['time'] = skipped.get('time', 0) + bad_time
    out = out.filter(pl.col('time').is_not_null())
    has_value = (pl.any_horizontal([pl.col(c).is_not_null() for c in values])
                 if values else pl.lit(False))
    dry = (~has_value) & (pl.col('result') == 'pass')
    dry_runs = out.filter(dry).height
    out = out.filter(~dry)
    return out, len(lines), dry_runs, skipped


def _field_at(parts, header, i, column):
    '''The values at place *i* of the header (old generations wrote
    ``key=value`` where their header did: the value), kept in *column*.'''
    if i not in column:
        values = parts.struct.field(f'field_{i}')
        if i in header.keyed:
            split = values.str.splitn('=', 2).struct.field('field_1')
            values = pl.select(
                pl.when(values.str.contains('=', literal=True))
                .then(split).otherwise(values)).to_series()
        column[i] = values
    return column[i]


def run_for_keys(row, present):
    '''A :class:`~.history.Run` with a key combination's fields (no
    figures), whose properties give the keys.'''
    system, partition = row['f:system'] or '', row['f:partition'] or ''
    combined = row['f:system:partition'] or ''
    if not partition and ':' in combined:
        system, partition = combined.split(':', 1)
    params = {name: row[f'f:{name}'] or '' for name in present}
    return history.Run(0.0, system, partition, row['f:display_name'] or '',
                       'pass', params, {})


def has_carriage_return(text):
    '''Whether *text* holds a ``\\r``, which the csv reader takes for a
    line's end (such blocks are read by the line reader).'''
    return '\r' in text

