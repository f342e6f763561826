"""``hpcml report``: the results history (:mod:`hpctestlib_ml.report`) as
text, with a score against a baseline, comparisons and figures; and the
options that say which history is read, which ``hpcml references``
shares."""
import contextlib
import dataclasses
import os
import sqlite3
import sys
import time

from hpctestlib_ml import paths, registry, settings
from hpctestlib_ml.commands import counting
from hpctestlib_ml.report import (analysis, history, nodes, plots, recent,
                                  render, store, store_parts,
                                  store_selection, wrong_answers)
from hpctestlib_ml.report.analysis import ReportError
from hpctestlib_ml.tsdb import read

#: The command's line in ``hpcml --help``.
HELP = ('tables, score against a baseline, comparisons and figures from '
        'perflogs and the results DB')


def add_history_arguments(parser, system_required=False):
    '''Where the history is read from and which runs are selected: the
    options ``hpcml report`` and ``hpcml references`` share (:func:`load`,
    :func:`~hpctestlib_ml.report.analysis.select`).'''
    parser.add_argument('--perflogs', nargs='+', metavar='PATH',
                        help='perflog files or directories (default: '
                             'PREFIX/perflogs)')
    # No default here: it would be the checkout's absolute path, on the
    # CLI page too (with_prefix sets it when the command runs).
    parser.add_argument('--prefix', metavar='DIR',
                        help="where the suite wrote: reframe's --prefix "
                             'DIR, else $HPCML_VAR_DIR, else var/ in the '
                             'repository (its perflogs and baselines)')
    parser.add_argument('--db', metavar='FILE',
                        help="ReFrame's results database (results.db); "
                             'alone, or with --perflogs')
    parser.add_argument('--tsdb', metavar='URL',
                        help='a VictoriaMetrics the suite sends to '
                             '(HPCML_TSDB_URL): its runs, of every system '
                             'or of --system; alone, or with --perflogs')
    parser.add_argument('--system', metavar='SYS[:PART]',
                        required=system_required)
    parser.add_argument('--workload')
    parser.add_argument('--since', metavar='WHEN',
                        help='7d, 12h, 30m ago, or an ISO date')


def with_prefix(args):
    '''*args* with ``--prefix`` where it was not given: the suite's
    ``var/`` (:data:`~hpctestlib_ml.paths.VAR_DIR`).'''
    if getattr(args, 'prefix', None) is None:
        args.prefix = paths.VAR_DIR
    return args


def add_arguments(parser):
    add_history_arguments(parser)
    parser.add_argument('--until', metavar='WHEN')
    parser.add_argument('--last', type=counting(), default=10, metavar='N',
                        help='runs in the median, and in each period of '
                             "'change' (the last N vs the N before)")
    parser.add_argument('--weights', metavar='FILE',
                        help='a site\'s headline metric and weight per '
                             'workload (YAML: workload: {metric: NAME, '
                             'better: higher|lower, weight: W}; default: '
                             'each workload\'s declared headline)')
    parser.add_argument('--save-baseline', metavar='NAME',
                        help='save the selected runs as a baseline '
                             '($HPCML_VAR_DIR/baselines/NAME.json, or a path)')
    parser.add_argument('--replace-baseline', action='store_true',
                        help='with --save-baseline: replace NAME even if it '
                             'holds the baseline of another --system')
    parser.add_argument('--baseline', metavar='NAME',
                        help='score the selected runs against a baseline')
    parser.add_argument('--compare', nargs=2, metavar=('A', 'B'),
                        help='two system[:partition]s, or session:UUIDs '
                             '(with --db)')
    parser.add_argument('--node-window', metavar='DURATION', default='12h',
                        help='slow nodes: each case\'s runs this long before '
                             'its latest are one sweep (default 12h, a '
                             'night)')
    parser.add_argument('--node-threshold', type=float,
                        default=nodes.THRESHOLD, metavar='SCORE',
                        help='slow nodes: flag a node slower than this '
                             'modified z-score against the partition\'s '
                             f'other nodes (default {nodes.THRESHOLD:g})')
    parser.add_argument('--out', metavar='DIR',
                        help='write figures and report.html here')
    parser.add_argument('--no-plots', action='store_true')


@dataclasses.dataclass
class Selected:
    '''The runs a report or ``hpcml references`` reads (:func:`load`).'''
    data: history.History   # what was read: files, counts (its runs: all
    #                         of them, or [] from the history store)
    read: int               # runs read
    runs: list              # the selected runs (from the store: each
    #                         case's latest, :mod:`~..report.recent`)
    logged: dict            # workload -> figures its runs logged
    totals: dict = None     # case_here -> CaseTotals (store), else None
    unkeyed: int = None     # runs without reference_case (store)
    case_values: object = None      # system -> case figures (store)
    component_runs: object = None   # system:partition -> runs (store)


def load(args, headlines, since=None, until=None, last=10,
         window=nodes.WINDOW):
    '''The :class:`Selected` runs the arguments name: the suite's perflogs
    (``perflogs`` under ``--prefix``, by default
    :data:`~hpctestlib_ml.paths.PERFLOG_DIR`) unless they name perflogs or
    a results DB; read through the history store
    (:mod:`~hpctestlib_ml.report.store`) where there is no results DB and
    the store is on.'''
    data = history.History()
    sources = []
    remote = getattr(args, 'tsdb', None)
    if args.perflogs or not (args.db or remote):
        sources = history.distinct_sources(
            args.perflogs or [os.path.join(args.prefix, 'perflogs')])
        for source in sources:
            if not os.path.exists(source):
                raise ReportError(f'no perflogs at {source}: run the suite '
                                  f'first, or pass --prefix DIR (where '
                                  f'reframe --prefix DIR wrote) or '
                                  f'--perflogs DIR')
    if sources and not (args.db or remote):
        selected = _through_stores(args, sources, headlines, since, until,
                                   last, window)
        if selected is not None:
            return selected
    if sources:
        data.extend(history.read_perflogs(sources))
    if args.db:
        if not os.path.exists(args.db):
            raise ReportError(f'no results database at {args.db}')
        try:
            data.extend(history.read_results_db(args.db))
        except (sqlite3.DatabaseError, ValueError) as err:
            raise ReportError(
                f'{args.db} is not a readable results database ({err}): move '
                f'it aside (ReFrame starts a new one at its next run) and '
                f'read the perflogs, which hold the same runs, with '
                f'--perflogs') from None
    if remote:
        try:
            data.extend(read.read_history(remote, args.system))
        except read.TsdbError as err:
            raise ReportError(str(err)) from None
    runs = analysis.select(data.runs, args.system, None, args.workload,
                           since, until)
    return Selected(data, len(data.runs), runs,
                    analysis.workload_metrics(data.runs))


def _through_stores(args, sources, headlines, since, until, last, window,
                    verify=False):
    ''':class:`Selected` of the perflogs at *sources* through their
    history stores (:func:`_from_stores`), or None where one is off or
    cannot be kept. Where polars cannot read a store (a damaged data page
    under an intact footer, which only reading it shows), every value of
    its parts is read (``open_store``'s *verify*), a damaged store rebuilt
    with one line, and the stores read again.'''
    try:
        with contextlib.ExitStack() as stack:
            try:
                stores = [stack.enter_context(store.open_store(
                              s, results_dir=args.prefix, verify=verify))
                          for s in sources]
            except settings.SettingError as err:
                raise ReportError(str(err)) from None
            if not all(stores):
                return None
            repair = None if verify else _Repair(
                lambda: _through_stores(args, sources, headlines, since,
                                        until, last, window, verify=True))
            return _from_stores(args, stores, headlines, since, until, last,
                                window, repair)
    except store_parts.READ_ERRORS:
        if verify:
            raise
    return _through_stores(args, sources, headlines, since, until, last,
                           window, verify=True)


class _Repair:
    '''The :class:`Selected` of the stores read again after one could not
    be read (made once, by *again*), for the queries a report makes after
    :func:`load` (its score, ``--compare``, components).'''

    def __init__(self, again):
        self.again = again
        self.selected = None

    def __call__(self):
        if self.selected is None:
            self.selected = self.again()
        if self.selected is None:
            raise ReportError(
                'the history store could not be read, nor rebuilt: run '
                f'again with {store.STORE_ENV}=off (the perflogs read line '
                f'by line)')
        return self.selected


def _from_stores(args, stores, headlines, since, until, last, window,
                 repair=None):
    ''':class:`Selected` of the history *stores*; its later queries call
    *repair* (a :class:`_Repair`) where a store cannot be read.'''
    data = history.History()
    read = 0
    for kept in stores:
        runs, dry_runs, skipped, files = kept.counts()
        read += runs
        data.dry_run_lines += dry_runs
        data.files += files
        data.unreadable_files.update(kept.left_out())
        for reason, count in skipped.items():
            data.skip(reason, count)
    selection = store_selection.StoreSelection(stores)
    frame, days = selection.select(args.system, None, args.workload, since,
                                   until)
    logged = selection.workload_metrics
    if frame is None:
        return Selected(data, read, [], logged)
    totals, unkeyed, runs = recent.latest(selection, frame, days, headlines,
                                          last, window)

    def case_values(system=None, chosen_headlines=headlines):
        try:
            chosen = selection.narrow(frame, system) if system else frame
            return recent.case_values(selection, chosen, chosen_headlines)
        except store_parts.READ_ERRORS:
            if repair is None:
                raise
            return repair().case_values(system, chosen_headlines)

    def component_runs(where):
        system, partition = where.split(':', 1)
        declared = registry.registered()
        kinds = [w for w, d in declared.items() if d.kind == 'component']
        try:
            return recent.component_runs(selection, frame, kinds, system,
                                         partition)
        except store_parts.READ_ERRORS:
            if repair is None:
                raise
            return repair().component_runs(where)

    return Selected(data, read, runs, logged, totals, unkeyed, case_values,
                    component_runs)


def run(args, out=print):
    '''The report; returns the exit status (1 if any selected case's latest
    run failed, or a run in the node window named a wrong answer, so CI
    can gate on it; 2 on bad input, named on stderr).'''
    try:
        return _report(with_prefix(args), out)
    except ReportError as err:
        print(f'hpcml report: error: {err}', file=sys.stderr)
        return 2


def _report(args, out):
    '''The report (:func:`run`), raising :class:`ReportError` on bad
    input.'''
    started = time.perf_counter()
    if args.replace_baseline and not args.save_baseline:
        raise ReportError('--replace-baseline does nothing without '
                          '--save-baseline NAME: add it, or leave '
                          '--replace-baseline out')
    if args.save_baseline:
        analysis.check_baseline_target(
            args.save_baseline,
            analysis.baseline_path(args.save_baseline, args.prefix),
            args.system, args.replace_baseline)
    headlines = analysis.load_weights(args.weights)
    since = analysis.parse_since(args.since) if args.since else None
    until = analysis.parse_since(args.until) if args.until else None
    window = analysis.duration(args.node_window)
    if window is None:
        raise ReportError(f'--node-window {args.node_window}: use 12h, 1d, '
                          f'90m')
    selected = load(args, headlines, since, until, args.last, window)
    for line in selected.data.unreadable_lines_of_files('report'):
        print(line, file=sys.stderr)
    if args.weights:
        analysis.check_weights(args.weights, headlines, selected.logged)
    data, runs = selected.data, selected.runs
    chosen = (len(runs) if selected.totals is None else
              sum(t.runs for t in selected.totals.values()))
    summary = (f'{chosen} runs selected of {selected.read} read from '
               f'{len(data.files)} files; ignored: {data.dry_run_lines} '
               f'dry-run lines (no values), {data.skipped_text()}')
    out(summary)
    if not selected.read:
        raise ReportError(data.nothing_read())
    if not runs:
        raise ReportError('no runs match the filters (--system, '
                          '--workload, --since, --until)')

    rows = analysis.table(runs, headlines, args.last, selected.totals,
                          selected.component_runs)
    out('')
    out('What changed:')
    out('\n'.join(render.change_lines(rows)))
    out('')
    out(render.text_table(render.TABLE_COLUMNS, render.table_cells(rows)))
    sections = _baselines(args, selected, headlines, summary, out)
    compared = _comparison(args, selected, headlines, sections, out)
    wrong, named = _wrong_answers(runs, window, out)
    slow = _slow_nodes(args, runs, headlines, window, out)
    if args.out:
        try:
            _figures(args, runs, headlines, rows, compared, summary,
                     sections, out, [(title, parts) for title, parts in (
                         ('Wrong answers', wrong), ('Slow nodes', slow))
                                     if parts])
        except OSError as err:
            raise ReportError(
                f'--out {args.out}: cannot write {err.filename or args.out} '
                f'({err.strerror}): pass --out a directory you may write '
                f'(the report above is complete)') from None
    out(f'report took {time.perf_counter() - started:.2f} s')
    return 1 if named or any(r.status != 'pass' for r in rows) else 0


def _stats(selected, headlines, system=None):
    ''':func:`~hpctestlib_ml.report.analysis.case_stats` of the selected
    runs (of *system* alone, a ``--compare`` side, where given).'''
    if selected.case_values is None:
        runs = (analysis.select(selected.runs, system=system) if system
                else selected.runs)
        return analysis.case_stats(runs, headlines)
    found, others = selected.case_values(system, headlines)
    return analysis.case_stats(others, headlines, found)


def _baselines(args, selected, headlines, summary, out):
    '''Save the runs as a baseline and score them against one, as the
    arguments ask; the report's sections (title, lines) it makes.'''
    sections = []
    if args.save_baseline:
        stats = _stats(selected, headlines)
        path = analysis.baseline_path(args.save_baseline, args.prefix)
        try:
            analysis.save_baseline(path, stats, summary, headlines,
                                   args.system)
        except OSError as err:
            raise ReportError(f'--save-baseline: cannot write {path} '
                              f'({err.strerror}): give a name or path where '
                              f'you may write') from None
        out(f'\nbaseline {args.save_baseline!r}: {len(stats)} cases -> {path}')
    if args.baseline:
        path = analysis.baseline_path(args.baseline, args.prefix)
        baseline, data = analysis.load_baseline(path)
        headlines = _baseline_headlines(args, headlines, baseline, data, path)
        stats = _stats(selected, headlines)
        result = analysis.score(stats, baseline, headlines)
        lines = render.score_lines(result, args.baseline, stats, baseline)
        sections.append((f'Score against {args.baseline}', lines))
        out('')
        out('\n'.join(lines))
    return sections


def _baseline_headlines(args, headlines, baseline, data, path):
    '''The headlines to score against *baseline* by: the ones it was
    saved with (:func:`~hpctestlib_ml.report.analysis.baseline_headlines`)
    where no ``--weights`` are given; the given ones where they agree with
    them, else :class:`ReportError`.'''
    saved = analysis.baseline_headlines(baseline, data)
    if args.weights:
        differ = analysis.headline_disagreements(headlines, saved)
        if differ:
            raise ReportError(
                f'--weights {args.weights} scores {"; ".join(differ)} '
                f'({path}): pass the weights the baseline was saved with, '
                f'or leave --weights out to score with them')
        return headlines
    return {**headlines, **saved}


def _side(selected, headlines, label):
    '''Case figures of one side of --compare: ``system:partition``,
    ``system`` or ``session:UUID`` (results DB).'''
    if label.startswith('session:'):
        uuid = label.split(':', 1)[1]
        chosen = [r for r in selected.runs if r.session.startswith(uuid)]
        stats = analysis.case_stats(chosen, headlines) if chosen else {}
    else:
        stats = _stats(selected, headlines, label)
    if not stats:
        raise ReportError(f'--compare {label}: no runs match (give '
                          f'system:partition, system, or session:UUID with '
                          f'--db)')
    return stats


def _comparison(args, selected, headlines, sections, out):
    '''The two sides of ``--compare`` side by side (added to *sections*),
    or None without it.'''
    if not args.compare:
        return None
    label_a, label_b = args.compare
    compared = analysis.compare_stats(_side(selected, headlines, label_a),
                                      _side(selected, headlines, label_b))
    lines = render.comparison_lines(compared, label_a, label_b)
    sections.append((f'{label_b} vs {label_a}', lines))
    out('')
    out('\n'.join(lines))
    return compared


def _wrong_answers(runs, window, out):
    '''The "Wrong answers" section (:mod:`hpctestlib_ml.report.
    wrong_answers`), printed where a run compared its ranks' answers: its
    parts for report.html, and whether a run named a wrong answer (a
    node sweep's run on the node named is not its case's latest: the
    exit status says it all the same).'''
    found = wrong_answers.wrong_answers(runs, window)
    parts = render.wrong_answer_section(found, window)
    if parts:
        out('')
        out('Wrong answers:')
        out('\n'.join(render.section_lines(parts)))
    return parts, bool(found.findings)


def _slow_nodes(args, runs, headlines, window, out):
    '''The "Slow nodes" section (:mod:`hpctestlib_ml.report.nodes`),
    printed where a case was swept over nodes or a run named a slowest
    rank; its parts for report.html.'''
    found = nodes.sweeps(runs, headlines, window)
    parts = render.slow_node_section(found, nodes.slow_ranks(runs, window),
                                     args.node_threshold, nodes.MIN_SPREAD,
                                     window)
    if parts:
        out('')
        out('Slow nodes:')
        out('\n'.join(render.section_lines(parts)))
    return parts


def _figures(args, runs, headlines, rows, compared, summary, sections, out,
             table_sections):
    '''The figures (unless ``--no-plots``) and report.html in ``--out``.'''
    os.makedirs(args.out, exist_ok=True)
    images = []
    if not args.no_plots:
        images += plots.timeseries(runs, headlines, args.out, rows)
        images += plots.scaling(runs, headlines, args.out)
        if compared:
            images.append(plots.comparison(
                compared, *args.compare,
                os.path.join(args.out, 'comparison.png')))
    page = os.path.join(args.out, 'report.html')
    with open(page, 'w') as fp:
        fp.write(render.html_page('hpcml performance report', summary,
                                  rows, sections, images, table_sections))
    out(f'\n{len(images)} figures and {page} written')

