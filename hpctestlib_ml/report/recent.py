"""What a report reads of the history stores (:mod:`.store`): the selected
runs' figures over the whole history (runs, failures, least and greatest
headline value per case, the passing runs a reference counts) computed in
the store, and, as :class:`~.history.Run` objects, only the runs whose
details the report shows: each case's latest runs, as many as the table,
the change detection (:data:`~hpctestlib_ml.changes.MAX_HISTORY` runs), the references
(``--last``) and the slow nodes (the latest ``--node-window``) look at.
Every other figure of the report is the same as from all runs
(tests/test_history_store.py); the figures of ``--out`` are drawn from
these runs.

A case (``Run.case_here``) of a workload that declares no headline keeps
all its runs (its headline is chosen from them).

Each function reads a *selection*
(:class:`~.store_selection.StoreSelection`) and a *frame* of its rows
(:meth:`~.store_selection.StoreSelection.select`).
"""
import dataclasses
import json
import math

import polars as pl

from hpctestlib_ml import changes
from hpctestlib_ml.report import store_parts


@dataclasses.dataclass
class CaseTotals:
    '''A case's figures over all its selected runs.'''
    runs: int
    failures: int
    passed: int
    minimum: float          # of its passing headline values, or None
    maximum: float


def _headlines(selection, headlines, by='case'):
    '''({headline metric logged: the *by* numbers of the cases whose
    workload declares it}, the numbers of the cases whose workload
    declares none: their runs are all kept).'''
    by_metric, undeclared = {}, []
    for number, key in selection.names.get(by, {}).items():
        workload = json.loads(key)[0]
        if workload not in headlines:
            undeclared.append(number)
        elif headlines[workload].metric in selection.metrics:
            by_metric.setdefault(headlines[workload].metric,
                                 []).append(number)
    return by_metric, undeclared


def _headline_value(selection, frame, headlines, by='case'):
    '''*frame* with ``hv``: each row's headline value (its case's
    workload's declared headline); and the undeclared cases
    (:func:`_headlines`).'''
    by_metric, undeclared = _headlines(selection, headlines, by)
    return (frame.with_columns(_per_case(by_metric, 'v:', by=by)
                               .alias('hv')), undeclared)


def latest(selection, frame, days, headlines, last, window):
    '''(case key (``Run.case_here``) -> :class:`CaseTotals`, the runs
    without a ``reference_case``, and the runs each case's report
    looks at (module docstring) as :class:`~.history.Run`, in the
    order the perflogs hold them).

    *days*: the selected rows' counts per day
    (:func:`.store_parts.day_counts`, kept with the store's parts), or None
    (counted here from *frame*, in polars' streaming engine). The
    counts give the totals and, for each kind of run the report wants
    the latest *n* of, the day from which on each case has *n* of
    them; the rows from that day on are read (the Parquet row groups
    of older times skipped by their statistics where every case has
    such a day), and among them each case's *n*-th latest found
    exactly. What the report reads grows with the days and the cases
    of the history, and the runs it shows, not with its runs (a
    headline value chosen per row, or a per-case ``top_k`` over all
    rows, would also hold the rows in memory).'''
    by_metric, undeclared = _headlines(selection, headlines)
    wanted, extra = _wanted(selection, last)
    used = sorted(set(by_metric) | set(extra))
    days, table = _days(selection, frame, days, by_metric, used)
    names = selection.names.get('case', {})
    totals = {tuple(json.loads(names[row['case']])): CaseTotals(
        row['runs'], row['failures'], row['passed'], row['minimum'],
        row['maximum']) for row in table.iter_rows(named=True)}
    unkeyed = int(table['unkeyed'].sum()) if table.height else 0
    if not table.height:
        return totals, unkeyed, []
    start = _first_rows(days, table, wanted, window, undeclared)
    rows = _rows_from(selection, frame, start, used, headlines)
    chosen = _chosen(rows, table, wanted, window, undeclared)
    return totals, unkeyed, selection.runs_of(chosen)


def _wanted(selection, last):
    '''The kinds of run :func:`latest` wants the latest *n* of, as
    (rows counted per day, n, the same as a condition on the rows), and
    the figures beside the headline the report shows the latest of
    (``mfu``, ``energy_per_sample_J``, where the selection logs them).'''
    deep = max(changes.MAX_HISTORY, 2 * last)
    wanted = [('n:good', deep, pl.col('ok') & pl.col('hv').is_not_null()),
              ('passed', last, pl.col('ok')),
              ('n:has', 1, pl.col('hv').is_not_null())]
    extra = [m for m in ('mfu', 'energy_per_sample_J')
             if m in selection.metrics]
    wanted += [(f'good:{m}', last,
                pl.col('ok') & pl.col(f'v:{m}').is_not_null())
               for m in extra]
    return wanted, extra


def _days(selection, frame, days, by_metric, used):
    '''(each case's counts per day, with its headline's ``minimum``,
    ``maximum``, ``n:good`` and ``n:has``; each case's totals over its
    days): from the store's counts per day *days*, or counted here from
    *frame* where None (:func:`latest`), of the metrics *used*.'''
    if days is None:
        days = store_parts.day_counts(
            frame.select('case', 'time', 'ok', 'keyed',
                         *[f'v:{m}' for m in used]), ('case', 'day'))
    else:
        days = store_parts.combine_days(days, ('case', 'day'))
    present = days.collect_schema().names()
    figures = [f'{kind}:{metric}' for metric in used
               for kind in ('min', 'max', 'good', 'has')]
    days = days.select(
        'case', 'day', 'runs', 'failures', 'passed', 'unkeyed', 'latest',
        'earliest', *[pl.col(c) if c in present else
                      pl.lit(None if c[:3] in ('min', 'max') else 0)
                      .alias(c) for c in figures]
    ).collect(engine='streaming').with_columns(
        _per_case(by_metric, 'min:').alias('minimum'),
        _per_case(by_metric, 'max:').alias('maximum'),
        _per_case(by_metric, 'good:', 0).alias('n:good'),
        _per_case(by_metric, 'has:', 0).alias('n:has'))
    table = days.group_by('case').agg(
        pl.col('runs', 'failures', 'passed', 'unkeyed').sum(),
        pl.col('minimum').min(), pl.col('maximum').max(),
        pl.col('latest').max())
    return days, table


def _first_rows(days, table, wanted, window, undeclared):
    '''Each case's first row to read (``cut``): the earliest of the day
    where, counted back from its latest day, each kind of run *wanted*
    reaches its n (-inf: never), and of its latest time less *window*.'''
    back = days.sort('day', descending=True)
    starts = [table.select('case', (pl.col('latest') - window)
                           .alias('start'))]
    for column, n, _ in wanted:
        reached = (back.with_columns(pl.col(column).cum_sum()
                                     .over('case').alias('count'))
                   .filter(pl.col('count') >= n)
                   .group_by('case')
                   .agg(pl.col('earliest').sort_by('day').last()))
        starts.append(table.select('case').join(
            reached, on='case', how='left').select(
            'case', pl.col('earliest').fill_null(-math.inf)))
    return _earliest(starts, undeclared)


def _rows_from(selection, frame, start, used, headlines):
    '''The rows of *frame* from each case's *start* on (the row groups
    of older times skipped where every case has one), with their
    headline value ``hv``.'''
    if math.isfinite(start['cut'].min()):
        frame = frame.filter(pl.col('time') >= start['cut'].min())
    columns = ['case', 'source', 'fid', 'line', 'time', 'ok',
               *[f'v:{m}' for m in used]]
    rows = (frame.join(start.lazy(), on='case', how='inner')
            .filter(pl.col('time') >= pl.col('cut'))
            .select(columns).collect(engine='streaming'))
    rows, _ = _headline_value(selection, rows.lazy(), headlines)
    return rows


def _chosen(rows, table, wanted, window, undeclared):
    '''The *rows* each case's report looks at: from the exact cut of
    each case among them, the *n*-th latest of each kind *wanted* and
    its latest time less *window*.'''
    cut = _earliest([table.select('case', (pl.col('latest') - window)
                                  .alias('cut')),
                     *[_nth_latest(rows, condition, n).collect()
                       for _, n, condition in wanted]], undeclared)
    return (rows.join(cut.lazy(), on='case', how='inner')
            .filter(pl.col('time') >= pl.col('cut')))


def case_values(selection, frame, headlines):
    '''Per :attr:`~.history.Run.case` key: (its passing headline
    values > 0 in time order, runs, failures, the first run with the
    headline) for :func:`~.analysis.case_stats`; and the runs of the
    cases whose workload declares no headline.'''
    frame, undeclared = _headline_value(
        selection, selection.with_order(frame), headlines, by='group')
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
        selection.runs_of(firsts.lazy(), exact_times=True)))
    names = selection.names.get('group', {})
    found = {}
    for row in table.iter_rows(named=True):
        if row['group'] in undeclared:
            continue
        first = first_runs.get((row['first_source'], row['first_fid'],
                                row['first_line']))
        found[tuple(json.loads(names[row['group']]))] = (
            row['values'], row['runs'], row['failures'], first)
    others = (selection.runs_of(
        frame.filter(pl.col('group').is_in(undeclared)))
        if undeclared else [])
    return found, others


def component_runs(selection, frame, components, system, partition):
    '''The runs of the component workloads *components* on
    ``system:partition`` that their change search reads: of each case,
    per figure, its latest :data:`~hpctestlib_ml.changes.MAX_HISTORY` passing runs,
    per node where every passing run names one (a node sweep).'''
    numbers = [selection.keys.get('workload', {}).get(w, -1)
               for w in components]
    here = frame.filter(
        pl.col('workload').is_in(numbers) & pl.col('ok') &
        (pl.col('system') == selection.keys.get('system', {}).get(system, -1))
        & (pl.col('partition') ==
           selection.keys.get('partition', {}).get(partition, -1)))
    swept = here.group_by('case').agg(
        pl.col('node').is_not_null().all().alias('swept'))
    here = here.join(swept, on='case')
    series = pl.when(pl.col('swept')).then(pl.col('node')).otherwise(-1)
    here = selection.with_order(here.with_columns(series.alias('series')))
    # the latest in time, then in the perflogs' order (as the line
    # reader's stable sort by time keeps them), of the rows with it
    newest = pl.struct('time', 'source', 'order', 'line')
    keep = pl.lit(False)
    for metric in sorted(selection.metrics):
        has = pl.col(f'v:{metric}').is_not_null()
        rank = (newest.rank('ordinal', descending=True)
                .over('case', 'series', has))
        keep = keep | (has & (rank <= changes.MAX_HISTORY))
    return selection.runs_of(here.filter(keep))


def _per_case(by_metric, prefix, default=None, by='case'):
    '''The column *prefix* + each case's headline metric, by the case
    numbers *by_metric* (:func:`_headlines`).'''
    value = pl.lit(default, pl.Float64 if default is None else pl.Int64)
    for metric, numbers in by_metric.items():
        value = pl.when(pl.col(by).is_in(numbers)).then(
            pl.col(f'{prefix}{metric}')).otherwise(value)
    return value


def _earliest(frames, undeclared):
    '''Per case, the least ``cut`` or ``start`` of *frames*, as ``cut``;
    -inf for the *undeclared* cases.'''
    found = (pl.concat([f.rename({f.columns[1]: 'cut'}) for f in frames],
                       how='vertical_relaxed')
             .group_by('case').agg(pl.col('cut').min()))
    return found.with_columns(
        pl.when(pl.col('case').is_in(undeclared)).then(-math.inf)
        .otherwise(pl.col('cut')).alias('cut'))


def _nth_latest(frame, condition, n):
    '''Per case, the time of its *n*-th latest row meeting *condition*, or
    -inf where it has fewer (a LazyFrame of ``case``, ``cut``).'''
    return (frame.filter(condition).group_by('case')
            .agg(pl.col('time').top_k(n).min().alias('cut'),
                 pl.len().alias('n'))
            .select('case', pl.when(pl.col('n') >= n).then(pl.col('cut'))
                    .otherwise(-math.inf).alias('cut')))
