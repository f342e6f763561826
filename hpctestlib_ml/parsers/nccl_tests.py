"""Logs of nccl-tests (NVIDIA/nccl-tests' ``all_reduce_perf``,
``all_gather_perf``, ``reduce_scatter_perf``, ...; ROCm's rccl-tests print
the same) and of the suite's ``python -m collectives``, which prints
nccl-tests' format (the ``Collectives`` component).

What nccl-tests prints (``src/common.cu``, ``src/util.cu``; a0b82b22,
2.19.6, and the older formats of the logs in ``tests/data/components/``)::

    # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
    # Using devices
    #  Rank  0 Group  0 Pid  12345 on   host1 device  0 [0000:04:00] NVIDIA H100 80GB HBM3
    # Collective test starting: all_reduce_perf          (2.14 and later)
    #                                                              out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
               8             2     float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 70.742

The columns are read by the header's names, so that the older tables
(no ``root``; ``error`` for ``#wrong``; no ``redop`` for all-gather before
2.10) and the per-iteration ones (``-I``) are read alike; each group of
columns starting at ``time`` is one placement, named by the line above
the header (``out-of-place``, ``in-place``; the suite's program prints the
one it measures, and after each row its figures to 6 significant
digits, which are read in place of the row's). Rows may sit behind a
launcher's label (``[1,0]<stdout>:``), taken off first
(:mod:`~hpctestlib_ml.parsers.labels`), and NCCL's INFO lines between them
are skipped. The
definitions of time, algbw and busbw: ``src/collectives/__init__.py``.

Which operation a table is: its ``# Collective test starting: <op>_perf``
line, else (older logs name none) its arithmetic: all-reduce's count is
the size's elements; all-gather's and reduce-scatter's each rank's share
(size / (elements x ranks)), told apart by the reduction column
(reduce-scatter reduces: ``sum``; all-gather ``none`` or no column).
Standard library only.
"""
import re

from hpctestlib_ml import metrics
from hpctestlib_ml.parsers import labels, timed_window

#: Bytes per element of nccl-tests' type names (``-d``).
TYPE_BYTES = {'int8': 1, 'uint8': 1, 'char': 1, 'int32': 4, 'uint32': 4,
              'int': 4, 'int64': 8, 'uint64': 8, 'half': 2, 'float16': 2,
              'bfloat16': 2, 'float': 4, 'float32': 4, 'double': 8,
              'float64': 8, 'f8e4m3': 1, 'f8e5m2': 1}

#: The perflog's names of the operations (``allreduce_busbw_GBps``).
SHORT = {'all_reduce': 'allreduce', 'all_gather': 'allgather',
         'reduce_scatter': 'reducescatter'}

HEADER = re.compile(r'#\s+size\s+count\s+type\s.*\btime\b')
SETTINGS = re.compile(r'# nThread (\d+) nGpus (\d+) minBytes (\d+) '
                      r'maxBytes (\d+).*?warmup iters: (\d+) iters: (\d+)')
RANK = re.compile(r'#\s+Rank\s+(\d+)\s')
STARTING = re.compile(r'# Collective test starting: (\w+?)(?:_perf\w*)?\s*$')
AVG_BUSBW = re.compile(r'# Avg bus bandwidth\s*:\s*(\S+)')
OUT_OF_BOUNDS = re.compile(r'# Out of bounds values\s*:\s*(\d+)')
#: The suite's program's comment after each row (its figures to 6
#: significant digits, the slowest rank's time).
PRECISE = re.compile(r'# hpcml: time_us=(\S+) max_time_us=(\S+) '
                     r'algbw_GBps=(\S+) busbw_GBps=(\S+)')
PLACEMENTS = re.compile(r'out-of-place|in-place')
ROW = re.compile(r'(?:^|\s|:)(\d+\s+\d+\s+[a-z]\w*\s.*)$')


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None                      # 'N/A' (no check, -c 0)


class Table:
    '''One table of a log: its operation (None until known), the header's
    columns and placement groups, and its rows.'''

    def __init__(self, op, columns, placements):
        self.op = op
        self.columns = columns
        first = columns.index('time')
        self.fixed = columns[:first]
        starts = [i for i, c in enumerate(columns) if c == 'time']
        self.groups = list(zip(starts, starts[1:] + [len(columns)]))
        self.placements = (placements + ['out-of-place', 'in-place'])[
            :len(self.groups)]
        self.rows = []
        self.avg_busbw = None
        self.out_of_bounds = None

    def add_row(self, tokens):
        '''A row of *tokens* (as many as the header's columns).'''
        row = dict(zip(self.fixed, tokens))
        row['size'], row['count'] = int(row['size']), int(row['count'])
        for (start, end), placement in zip(self.groups, self.placements):
            values = dict(zip(self.columns[start:end], tokens[start:end]))
            wrong = values.get('#wrong', values.get('error'))
            row[placement] = {'time_us': _number(values['time']),
                              'algbw_GBps': _number(values['algbw']),
                              'busbw_GBps': _number(values['busbw']),
                              'wrong': _number(wrong) if wrong else None}
        self.rows.append(row)


def read_tables(text):
    '''The tables of *text* (launchers' labels taken off) and the log's
    settings: ([:class:`Table`], {'ranks': set, 'iters': int or None,
    'warmup_iters': ...}).'''
    text = labels.strip(text)
    tables, ranks, settings = [], set(), {}
    op, placements, table = None, [], None
    for line in text.splitlines():
        if (m := SETTINGS.search(line)):
            settings.update(warmup_iters=int(m.group(5)),
                            iters=int(m.group(6)))
        elif (m := RANK.search(line)):
            ranks.add(int(m.group(1)))
        elif (m := STARTING.search(line)):
            op, table = m.group(1), None
        elif HEADER.search(line):
            columns = line[line.index('#') + 1:].split()
            table = Table(op, columns, placements)
            tables.append(table)
            op, placements = None, []
        elif PLACEMENTS.search(line) and line.lstrip().startswith('#'):
            placements = PLACEMENTS.findall(line)
        elif table is not None:
            _read_line(table, line)
    return tables, {'ranks': ranks, **settings}


def _read_line(table, line):
    '''A row, or a summary line, of *table*.'''
    if (m := AVG_BUSBW.search(line)):
        table.avg_busbw = _number(m.group(1))
    elif (m := OUT_OF_BOUNDS.search(line)):
        table.out_of_bounds = int(m.group(1))
    elif (m := PRECISE.search(line)) and table.rows:
        row = table.rows[-1]
        row['max_time_us'] = _number(m.group(2))
        _measured(row).update(time_us=_number(m.group(1)),
                              algbw_GBps=_number(m.group(3)),
                              busbw_GBps=_number(m.group(4)))
    elif (m := ROW.search(line)):
        tokens = m.group(1).split()
        if len(tokens) == len(table.columns):
            table.add_row(tokens)


def infer_op(table, world):
    '''The operation of a table that does not name it, from its largest
    row's arithmetic (module docstring); None where it cannot tell.'''
    rows = [r for r in table.rows if r['size'] and r['count']]
    if not rows:
        return None
    row = rows[-1]
    elements = row['size'] / TYPE_BYTES.get(row.get('type'), 4)
    if elements == row['count']:
        root = row.get('root', '-1')
        return 'all_reduce' if root in ('-1', None) else None
    if world and abs(elements / row['count'] - world) < 1e-9:
        return ('reduce_scatter' if row.get('redop') not in (None, 'none')
                else 'all_gather')
    return None


def _measured(row):
    '''A row's figures of its first placement group: out-of-place where
    the table has it (nccl-tests' first), else in-place.'''
    return row.get('out-of-place') or row.get('in-place')


def op_figures(op, table):
    '''The figures of *op*'s *table*, named ``<op>_...`` with *op*'s
    perflog name (:data:`SHORT`): at its largest size ``busbw_GBps`` (the
    headline: the link's rate once latency no longer counts),
    ``algbw_GBps``, ``time_us`` and ``size_bytes``; at its smallest size
    above 0 ``latency_us`` (the time of one small operation) and
    ``latency_size_bytes``; ``avg_busbw_GBps`` (nccl-tests' ``Avg bus
    bandwidth``: the mean over its sizes and placements, CSCS's figure),
    ``wrong`` (out-of-bounds values; None where not checked).'''
    rows = sorted((r for r in table.rows if r['size'] > 0),
                  key=lambda r: r['size'])
    if not rows:
        return {}
    name = SHORT.get(op, op)
    largest, smallest = _measured(rows[-1]), _measured(rows[0])
    wrongs = [_measured(r)['wrong'] for r in table.rows]
    wrong = (table.out_of_bounds if table.out_of_bounds is not None
             else None if None in wrongs else int(sum(wrongs)))
    return {f'{name}_busbw_GBps': largest['busbw_GBps'],
            f'{name}_algbw_GBps': largest['algbw_GBps'],
            f'{name}_time_us': largest['time_us'],
            f'{name}_size_bytes': rows[-1]['size'],
            f'{name}_latency_us': smallest['time_us'],
            f'{name}_latency_size_bytes': rows[0]['size'],
            f'{name}_avg_busbw_GBps': table.avg_busbw,
            f'{name}_wrong': wrong}


def _results(table):
    '''The rows of *table* as ``hpcml extract`` prints them.'''
    keep = ('size', 'count', 'type', 'redop', 'out-of-place', 'in-place',
            'max_time_us')
    return [{k: row[k] for k in keep if k in row} for row in table.rows]


#: ``hpcml extract``'s keys for the :class:`~hpctestlib_ml.metrics.
#: TrainingLog` fields of these logs.
JSON_NAMES = {'steps': 'iters', 'world_size': 'world_size',
              'timed_window': 'timed_window'}


def training_log(text):
    '''A log of nccl-tests or of ``python -m collectives`` as a
    :class:`~hpctestlib_ml.metrics.TrainingLog`: ``steps`` the timed
    iterations per size (``iters:``), ``world_size`` and ``ranks`` the
    ``#  Rank`` lines' ranks, ``timed_window`` (the suite's line), no
    losses; figures: ``operations`` (in the log's order, the first table
    of each), ``warmup_iters``, :func:`op_figures` of each operation and
    ``results`` (operation -> its rows).'''
    text = labels.strip(text)
    tables, settings = read_tables(text)
    ranks = frozenset(settings['ranks'])
    world = len(ranks) or None
    by_op = {}
    for table in tables:
        op = table.op or infer_op(table, world)
        if op and op not in by_op and table.rows:
            by_op[op] = table
    figures = {'operations': list(by_op),
               'warmup_iters': settings.get('warmup_iters')}
    for op, table in by_op.items():
        figures.update(op_figures(op, table))
    figures['results'] = {op: _results(t) for op, t in by_op.items()}
    return metrics.TrainingLog(
        steps=settings.get('iters'), world_size=world, ranks=ranks or None,
        timed_window=timed_window.from_suite_line(text), figures=figures)


def extract_metrics(text):
    '''The metrics of :func:`training_log` as ``hpcml extract`` prints
    them.'''
    return training_log(text).as_dict(JSON_NAMES)
