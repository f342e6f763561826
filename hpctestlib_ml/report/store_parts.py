"""The Parquet files of a history store (:mod:`.store`): a part's rows
(``part-N.parquet``) and their counts per day (``part-N.days.parquet``),
their columns, and how they are written and checked.
"""
import errno
import os

import polars as pl

#: Rows of a Parquet row group: a query for recent runs reads the groups
#: of their times only.
ROW_GROUP = 65536
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


def days_name(part):
    '''The name of the counts per day of the part named *part*.'''
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


#: What reading a damaged part can raise: polars' errors (a data page
#: that does not decode: ``ComputeError: parquet: File out of
#: specification``), the OS's (a part a concurrent report merged away) and
#: a panic in a decoder (pyo3's ``PanicException``, a BaseException).
READ_ERRORS = (pl.exceptions.PolarsError, OSError,
               pl.exceptions.PanicException)


def check_part(path, columns, whole=False):
    ''':class:`StoreError` unless *path* is a readable Parquet file with
    *columns*: its footer (cheap, at every report), with *whole* every
    value too (in polars' streaming engine: after a report could not read
    a part; a damaged data page under an intact footer is seen only so).'''
    try:
        schema = pl.read_parquet_schema(path)
        if whole:
            pl.scan_parquet(path).select(pl.all().hash().sum()).collect(
                engine='streaming')
    except FileNotFoundError:
        raise StoreError(f'{os.path.basename(path)} is missing') from None
    except READ_ERRORS as err:      # polars' and the OS's errors alike
        raise StoreError(f'{os.path.basename(path)}: '
                         f'{(str(err) or type(err).__name__).splitlines()[0]}'
                         ) from None
    missing = set(columns) - set(schema)
    if missing:
        raise StoreError(f'{os.path.basename(path)} lacks the columns '
                         f'{", ".join(sorted(missing))}')


def write_part(frame, path):
    '''*frame* written to *path* (through a ``.partial`` file: a reader
    never sees half of it).'''
    partial = f'{path}.partial'
    frame.write_parquet(partial, statistics=True, row_group_size=ROW_GROUP)
    os.replace(partial, path)


#: Free bytes below which a failed write is taken for a full disk where
#: the error does not say (polars reports ENOSPC as ``ComputeError:
#: parquet: File out of specification: Invalid thrift: transport error``).
FULL_BELOW = 1 << 20


def disk_full(err, directory):
    '''Where writing the store in *directory* failed with *err*: the
    free space there (text) if the disk (or the user's quota) is full,
    else None. Taken before the failed write's files are removed.'''
    try:
        stat = os.statvfs(directory)
        free = stat.f_bavail * stat.f_frsize
    except OSError:
        free = None
    text = str(err)
    said = (getattr(err, 'errno', None) in (errno.ENOSPC, errno.EDQUOT) or
            'os error 28' in text or 'No space left' in text or
            'os error 122' in text)
    if said or (free is not None and free < FULL_BELOW and
                not isinstance(err, OSError)):
        return 'unknown' if free is None else f'{free >> 10} KiB free'
    return None
