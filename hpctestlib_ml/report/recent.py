"""What a report reads of the history stores (:mod:`.store`): the selected
runs' figures over the whole history (runs, failures, least and greatest
headline value per case, the passing runs a reference counts) computed in
the store, and, as :class:`~.history.Run` objects, only the runs whose
details the report shows: each case's latest runs, as many as the table,
the change detection (:data:`~.changes.MAX_HISTORY` runs), the references
(``--last``) and the slow nodes (the latest ``--node-window``) look at.
Every other figure of the report is the same as from all runs
(tests/test_history_store.py); the figures of ``--out`` are drawn from
these runs.

A case (``Run.case_here``) of a workload that declares no headline keeps
all its runs (its headline is chosen from them).
"""
import dataclasses
import json
import math

import polars as pl

from hpctestlib_ml.report import changes, history


@dataclasses.dataclass
class CaseTotals:
    '''A case's figures over all its selected runs.'''
    runs: int
    failures: int
    passed: int
    minimum: float          # of its passing headline values, or None
    maximum: float


class StoreSelection:
    '''The selected runs of one or more stores (:meth:`select`).'''

    def __init__(self, stores):
        self.stores = stores
        self.keys = {}          # kind -> {key: global number}
        frames = [self._scan(rank, store) for rank, store in
                  enumerate(stores)]
        frames = [f for f in frames if f is not None]
        self.frame = (pl.concat(frames, how='diagonal_relaxed')
                      if frames else None)
        self.names = {kind: {n: k for k, n in table.items()}
                      for kind, table in self.keys.items()}
        self.headers = {}
        for rank, store in enumerate(stores):
            for entry in store.manifest['files'].values():
                self.headers[(rank, entry.fid)] = entry.header
        self.metrics = set()
        self.workload_metrics = {}
        for store in stores:
            self.metrics |= set(store.manifest['metrics'])
            for name, listed in store.manifest['workload_metrics'].items():
                self.workload_metrics.setdefault(name, set()).update(listed)

    def _global(self, kind, key):
        table = self.keys.setdefault(kind, {})
        if key not in table:
            table[key] = len(table)
        return table[key]

    def _scan(self, rank, store):
        frame = store.scan()
        if frame is None:
            return None
        remap = []
        for kind in ('case', 'group', 'workload', 'system', 'partition',
                     'node'):
            local = store.manifest['keys'][kind]
            mapping = {n: self._global(kind, k) for k, n in local.items()}
            remap.append(pl.col(kind).replace_strict(
                mapping, default=None, return_dtype=pl.Int32))
        files = sorted(store.manifest['files'].items())
        order = {e.fid: i for i, (_, e) in enumerate(files)}
        return frame.with_columns(
            *remap, pl.lit(rank, pl.Int32).alias('source'),
            pl.col('fid').replace_strict(order, default=None,
                                         return_dtype=pl.Int32)
            .alias('order'))

    # Selection

    def select(self, system=None, partition=None, workload=None, since=None,
               until=None):
        '''The rows matching the report's filters (a LazyFrame), or None.'''
        if self.frame is None:
            return None
        frame = self.narrow(self.frame, system, partition, workload)
        if since is not None:
            frame = frame.filter(pl.col('time') >= since)
        if until is not None:
            frame = frame.filter(pl.col('time') <= until)
        return frame

    def narrow(self, frame, system=None, partition=None, workload=None):
        '''The rows of *frame* of *system* (``sys:part``), *partition*
        and *workload*.'''
        if system and ':' in system:
            system, partition = system.split(':', 1)
        for kind, value in (('system', system), ('partition', partition),
                            ('workload', workload)):
            if value:
                number = self.keys.get(kind, {}).get(value, -1)
                frame = frame.filter(pl.col(kind) == number)
        return frame

    def _headline_value(self, frame, headlines, by='case'):
        '''*frame* with ``hv``: each row's headline value (its case's
        workload's declared headline), and the cases whose workload
        declares none (their runs are all kept).'''
        names = self.names.get(by, {})
        by_metric, undeclared = {}, []
        for number, key in names.items():
            workload = json.loads(key)[0]
            if workload in headlines:
                by_metric.setdefault(headlines[workload].metric,
                                     []).append(number)
            else:
                undeclared.append(number)
        value = pl.lit(None, pl.Float64)
        for metric, numbers in by_metric.items():
            if metric in self.metrics:
                value = pl.when(pl.col(by).is_in(numbers)).then(
                    pl.col(f'v:{metric}')).otherwise(value)
        return frame.with_columns(value.alias('hv')), undeclared

    def totals(self, frame, headlines):
        '''Case key (``Run.case_here``) -> :class:`CaseTotals`; and the
        runs without a ``reference_case``.'''
        frame, _ = self._headline_value(frame, headlines)
        good = pl.col('ok') & pl.col('hv').is_not_null()
        table = frame.group_by('case').agg(
            pl.len().alias('runs'), (~pl.col('ok')).sum().alias('failures'),
            pl.col('ok').sum().alias('passed'),
            pl.col('hv').filter(good).min().alias('minimum'),
            pl.col('hv').filter(good).max().alias('maximum'),
            (~pl.col('keyed')).sum().alias('unkeyed')).collect()
        names = self.names.get('case', {})
        totals = {tuple(json.loads(names[row['case']])): CaseTotals(
            row['runs'], row['failures'], row['passed'], row['minimum'],
            row['maximum']) for row in table.iter_rows(named=True)}
        return totals, int(table['unkeyed'].sum()) if table.height else 0

    def recent_runs(self, frame, headlines, last, window):
        '''The runs each case's report looks at (module docstring), as
        :class:`~.history.Run`, in the order the perflogs hold them.'''
        frame, undeclared = self._headline_value(frame, headlines)
        deep = max(changes.MAX_HISTORY, 2 * last)
        cuts = [_nth_latest(frame, pl.col('ok') & pl.col('hv').is_not_null(),
                            deep),
                _nth_latest(frame, pl.col('ok'), last),
                _nth_latest(frame, pl.col('hv').is_not_null(), 1)]
        for metric in ('mfu', 'energy_per_sample_J'):
            if metric in self.metrics:
                cuts.append(_nth_latest(
                    frame, pl.col('ok') & pl.col(f'v:{metric}').is_not_null(),
                    last))
        latest = frame.group_by('case').agg(
            (pl.col('time').max() - window).alias('cut'))
        cut = pl.concat([latest.collect(), *[c.collect() for c in cuts]],
                        how='vertical_relaxed')
        cut = cut.group_by('case').agg(pl.col('cut').min())
        if undeclared:
            cut = cut.with_columns(
                pl.when(pl.col('case').is_in(undeclared))
                .then(-math.inf).otherwise(pl.col('cut')).alias('cut'))
        chosen = (frame.join(cut.lazy(), on='case', how='inner')
                  .filter(pl.col('time') >= pl.col('cut')))
        return self.runs_of(chosen)

    def runs_of(self, frame, exact_times=False):
        '''The :class:`~.history.Run` of each row of *frame* (a
        LazyFrame), in the perflogs' order. The rows are chosen on the
        numeric columns first; their lines are then read from the row
        groups of their times only (the ``raw`` column is most of the
        store). *exact_times*: few rows, far apart in time.'''
        keys = (frame.select('source', 'order', 'fid', 'line', 'time')
                .collect())
        found = []
        for source, store in enumerate(self.stores):
            mine = keys.filter(pl.col('source') == source)
            if not mine.height:
                continue
            times = mine['time']
            if exact_times:
                when = pl.col('time').is_in(times.unique().to_list())
            else:
                when = pl.col('time').is_between(times.min(), times.max())
            raw = (store.scan().filter(when)
                   .join(mine.lazy().select('fid', 'line'),
                         on=['fid', 'line'], how='semi')
                   .select('fid', 'line', 'raw').collect())
            found.append(mine.join(raw, on=['fid', 'line']))
        if not found:
            return []
        rows = pl.concat(found).sort('source', 'order', 'line')
        parsers, runs = {}, []
        for source, fid, raw in zip(rows['source'], rows['fid'],
                                    rows['raw']):
            parser = parsers.get((source, fid))
            if parser is None:
                header = next(history.perflog_rows(
                    self.headers[(source, fid)] + '\n'))
                parser = parsers[(source, fid)] = history.RowParser(header)
            runs.append(parser.parse(next(history.perflog_rows(raw + '\n'))))
        return runs

    # Figures over all runs

    def case_values(self, frame, headlines):
        '''Per :attr:`~.history.Run.case` key: (its passing headline
        values > 0 in time order, runs, failures, the first run with the
        headline) for :func:`~.analysis.case_stats`; and the runs of the
        cases whose workload declares no headline.'''
        frame, undeclared = self._headline_value(frame, headlines,
                                                 by='group')
        order = ['time', 'source', 'order', 'line']
        has = pl.col('hv').is_not_null()
        good = pl.col('ok') & (pl.col('hv') > 0)
        table = frame.group_by('group').agg(
            pl.col('hv').filter(good).sort_by(
                [pl.col(o).filter(good) for o in order]).alias('values'),
            pl.len().alias('runs'), (~pl.col('ok')).sum().alias('failures'),
            *[pl.col(c).filter(has).sort_by(
                [pl.col(o).filter(has) for o in order]).first()
              .alias(f'first_{c}') for c in ('source', 'order', 'fid', 'line',
                                              'time')]).collect()
        firsts = table.filter(pl.col('first_fid').is_not_null()).select(
            **{c: pl.col(f'first_{c}') for c in ('source', 'order', 'fid',
                                                  'line', 'time')}
        ).sort('source', 'order', 'line')
        first_runs = dict(zip(
            zip(firsts['source'], firsts['fid'], firsts['line']),
            self.runs_of(firsts.lazy(), exact_times=True)))
        names = self.names.get('group', {})
        found = {}
        for row in table.iter_rows(named=True):
            if row['group'] in undeclared:
                continue
            first = first_runs.get((row['first_source'], row['first_fid'],
                                    row['first_line']))
            found[tuple(json.loads(names[row['group']]))] = (
                row['values'], row['runs'], row['failures'], first)
        others = (self.runs_of(frame.filter(pl.col('group').is_in(undeclared)))
                  if undeclared else [])
        return found, others

    def component_runs(self, frame, components, system, partition):
        '''The runs of the component workloads *components* on
        ``system:partition`` that their change search reads: of each case,
        per figure, its latest :data:`~.changes.MAX_HISTORY` passing runs,
        per node where every passing run names one (a node sweep).'''
        numbers = [self.keys.get('workload', {}).get(w, -1)
                   for w in components]
        here = frame.filter(
            pl.col('workload').is_in(numbers) & pl.col('ok') &
            (pl.col('system') == self.keys.get('system', {}).get(system, -1))
            & (pl.col('partition') ==
               self.keys.get('partition', {}).get(partition, -1)))
        swept = here.group_by('case').agg(
            pl.col('node').is_not_null().all().alias('swept'))
        here = here.join(swept, on='case')
        series = pl.when(pl.col('swept')).then(pl.col('node')).otherwise(-1)
        here = here.with_columns(series.alias('series'))
        keep = pl.lit(False)
        for metric in sorted(self.metrics):
            has = pl.col(f'v:{metric}').is_not_null()
            rank = (pl.when(has).then(pl.col('time')).otherwise(None)
                    .rank('ordinal', descending=True)
                    .over('case', 'series'))
            keep = keep | (has & (rank <= changes.MAX_HISTORY))
        return self.runs_of(here.filter(keep))


def _nth_latest(frame, condition, n):
    '''Per case, the time of its *n*-th latest row meeting *condition*, or
    -inf where it has fewer (a LazyFrame of ``case``, ``cut``).'''
    return (frame.filter(condition).group_by('case')
            .agg(pl.col('time').top_k(n).min().alias('cut'),
                 pl.len().alias('n'))
            .select('case', pl.when(pl.col('n') >= n).then(pl.col('cut'))
                    .otherwise(-math.inf).alias('cut')))
