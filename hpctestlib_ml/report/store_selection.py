"""The selected rows of one or more history stores (:mod:`.store`): their
rows scanned as one frame, with each key (case, workload, system...)
numbered as all stores' are, narrowed to the report's filters, and read
back as :class:`~.history.Run` objects (:meth:`StoreSelection.runs_of`).
What a report computes from them is :mod:`.recent`.
"""
import polars as pl

from hpctestlib_ml.report import history


class StoreSelection:
    '''The rows of one or more stores, and the selected ones
    (:meth:`select`).'''

    def __init__(self, stores):
        self.stores = stores
        self.keys = {}          # kind -> {key: global number}
        frames = [self._scan(rank, store) for rank, store in
                  enumerate(stores)]
        frames = [f for f in frames if f is not None]
        self.frame = (pl.concat(frames, how='diagonal_relaxed')
                      if frames else None)
        days = [self._scan(rank, store, days=True) for rank, store in
                enumerate(stores)]
        days = [f for f in days if f is not None]
        self.days = (pl.concat(days, how='diagonal_relaxed')
                     if days else None)
        # Each file's place in the perflogs' order (by path, as the line
        # reader reads them), joined to the few rows that need it.
        order = [(rank, entry.fid, place) for rank, store in
                 enumerate(stores) for place, (_, entry) in
                 enumerate(sorted(store.manifest['files'].items()))]
        self.order = pl.DataFrame(order, orient='row', schema={
            'source': pl.Int32, 'fid': pl.Int32, 'order': pl.Int32})
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

    def _scan(self, rank, store, days=False):
        '''*store*'s rows (with *days*, its counts per day), its keys
        numbered as all stores' are (a join with each key that numbers
        differently: one store's never do; a join, unlike
        ``replace_strict``, keeps polars' streaming engine streaming, in
        bounded memory).'''
        frame = store.scan(days)
        if frame is None:
            return None
        kinds = (('case', 'workload', 'system', 'partition') if days else
                 ('case', 'group', 'workload', 'system', 'partition', 'node'))
        for kind in kinds:
            local = store.manifest['keys'][kind]
            mapping = {n: self._global(kind, k) for k, n in local.items()}
            if all(n == g for n, g in mapping.items()):
                continue
            table = pl.DataFrame(
                {kind: list(mapping), '_global': list(mapping.values())},
                schema={kind: pl.Int32, '_global': pl.Int32})
            frame = (frame.join(table.lazy(), on=kind, how='left')
                     .drop(kind).rename({'_global': kind}))
        return frame.with_columns(pl.lit(rank, pl.Int32).alias('source'))

    def with_order(self, frame):
        '''*frame* with ``order``: its file's place in the perflogs'
        order.'''
        return frame.join(self.order.lazy(), on=['source', 'fid'],
                          how='left')

    # Selection

    def select(self, system=None, partition=None, workload=None, since=None,
               until=None):
        '''The rows matching the report's filters (a LazyFrame), or None;
        and their counts per day (:func:`.store.day_counts`), or None where
        *since* or *until* cut days.'''
        if self.frame is None:
            return None, None
        frame = self.narrow(self.frame, system, partition, workload)
        if since is not None:
            frame = frame.filter(pl.col('time') >= since)
        if until is not None:
            frame = frame.filter(pl.col('time') <= until)
        days = (None if since is not None or until is not None else
                self.narrow(self.days, system, partition, workload))
        return frame, days

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

    def runs_of(self, frame, exact_times=False):
        '''The :class:`~.history.Run` of each row of *frame* (a
        LazyFrame), in the perflogs' order. The rows are chosen on the
        numeric columns first; their lines are then read from the row
        groups of their times only (the ``raw`` column is most of the
        store). *exact_times*: few rows, far apart in time.'''
        keys = self.with_order(
            frame.select('source', 'fid', 'line', 'time')
        ).collect(engine='streaming')
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
