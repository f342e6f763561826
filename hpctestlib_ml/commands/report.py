"""``hpcml report``: the results history (:mod:`hpctestlib_ml.report`) as
text, with a score against a baseline, comparisons and figures; and the
options that say which history is read, which ``hpcml references``
shares."""
import os
import sqlite3
import sys
import time

from hpctestlib_ml import paths
from hpctestlib_ml.report import analysis, history, nodes, plots, render
from hpctestlib_ml.report.analysis import ReportError

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
    parser.add_argument('--prefix', metavar='DIR', default=paths.VAR_DIR,
                        help="where the suite wrote: reframe's --prefix "
                             'DIR, else $HPCML_VAR_DIR, else var/ in the '
                             'repository (its perflogs and baselines)')
    parser.add_argument('--db', metavar='FILE',
                        help="ReFrame's results database (results.db); "
                             'alone, or with --perflogs')
    parser.add_argument('--system', metavar='SYS[:PART]',
                        required=system_required)
    parser.add_argument('--workload')
    parser.add_argument('--since', metavar='WHEN',
                        help='7d, 12h, 30m ago, or an ISO date')


def add_arguments(parser):
    add_history_arguments(parser)
    parser.add_argument('--until', metavar='WHEN')
    parser.add_argument('--last', type=int, default=10, metavar='N',
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


def load(args):
    '''The :class:`~hpctestlib_ml.report.history.History` the arguments
    name: the suite's perflogs (``perflogs`` under ``--prefix``, by
    default :data:`~hpctestlib_ml.paths.PERFLOG_DIR`) unless they name
    perflogs or a results DB.'''
    data = history.History()
    if args.perflogs or not args.db:
        sources = args.perflogs or [os.path.join(args.prefix, 'perflogs')]
        for source in sources:
            if not os.path.exists(source):
                raise ReportError(f'no perflogs at {source}: run the suite '
                                  f'first, or pass --prefix DIR (where '
                                  f'reframe --prefix DIR wrote) or '
                                  f'--perflogs DIR')
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
    return data


def run(args, out=print):
    '''The report; returns the exit status (1 if any selected case's latest
    run failed, so CI can gate on it; 2 on bad input, named on stderr).'''
    try:
        return _report(args, out)
    except ReportError as err:
        print(f'hpcml report: error: {err}', file=sys.stderr)
        return 2


def _report(args, out):
    '''The report (:func:`run`), raising :class:`ReportError` on bad
    input.'''
    started = time.perf_counter()
    headlines = analysis.load_weights(args.weights)
    data = load(args)
    if args.weights:
        analysis.check_weights(args.weights, headlines, data.runs)
    since = analysis.parse_since(args.since) if args.since else None
    until = analysis.parse_since(args.until) if args.until else None
    runs = analysis.select(data.runs, args.system, None, args.workload,
                           since, until)
    summary = (f'{len(runs)} runs selected of {len(data.runs)} read from '
               f'{len(data.files)} files; ignored: {data.dry_run_lines} '
               f'dry-run lines (no values), {data.skipped_text()}')
    out(summary)
    if not data.runs:
        raise ReportError(data.nothing_read())
    if not runs:
        raise ReportError('no runs match the filters (--system, '
                          '--workload, --since, --until)')

    rows = analysis.table(runs, headlines, args.last)
    out('')
    out('What changed:')
    out('\n'.join(render.change_lines(rows)))
    out('')
    out(render.text_table(render.TABLE_COLUMNS, render.table_cells(rows)))
    sections = _baselines(args, runs, headlines, summary, out)
    compared = _comparison(args, runs, headlines, sections, out)
    slow = _slow_nodes(args, runs, headlines, out)
    if args.out:
        try:
            _figures(args, runs, headlines, rows, compared, summary,
                     sections, out, [('Slow nodes', slow)] if slow else [])
        except OSError as err:
            raise ReportError(
                f'--out {args.out}: cannot write {err.filename or args.out} '
                f'({err.strerror}): pass --out a directory you may write '
                f'(the report above is complete)') from None
    out(f'report took {time.perf_counter() - started:.2f} s')
    return 1 if any(r.status != 'pass' for r in rows) else 0


def _baselines(args, runs, headlines, summary, out):
    '''Save the runs as a baseline and score them against one, as the
    arguments ask; the report's sections (title, lines) it makes.'''
    sections = []
    stats = analysis.case_stats(runs, headlines)
    if args.save_baseline:
        path = analysis.baseline_path(args.save_baseline, args.prefix)
        try:
            analysis.save_baseline(path, stats, summary, headlines)
        except OSError as err:
            raise ReportError(f'--save-baseline: cannot write {path} '
                              f'({err.strerror}): give a name or path where '
                              f'you may write') from None
        out(f'\nbaseline {args.save_baseline!r}: {len(stats)} cases -> {path}')
    if args.baseline:
        path = analysis.baseline_path(args.baseline, args.prefix)
        baseline, data = analysis.load_baseline(path)
        headlines, stats = _baseline_headlines(args, headlines, runs,
                                               baseline, data, path)
        result = analysis.score(stats, baseline, headlines)
        lines = render.score_lines(result, args.baseline, stats, baseline)
        sections.append((f'Score against {args.baseline}', lines))
        out('')
        out('\n'.join(lines))
    return sections


def _baseline_headlines(args, headlines, runs, baseline, data, path):
    '''The headlines and case figures to score against *baseline* by:
    the ones it was saved with (:func:`~hpctestlib_ml.report.analysis.
    baseline_headlines`) where no ``--weights`` are given; the given ones
    where they agree with them, else :class:`ReportError`.'''
    saved = analysis.baseline_headlines(baseline, data)
    if args.weights:
        differ = analysis.headline_disagreements(headlines, saved)
        if differ:
            raise ReportError(
                f'--weights {args.weights} scores {"; ".join(differ)} '
                f'({path}): pass the weights the baseline was saved with, '
                f'or leave --weights out to score with them')
        return headlines, analysis.case_stats(runs, headlines)
    headlines = {**headlines, **saved}
    return headlines, analysis.case_stats(runs, headlines)


def _side(runs, label):
    '''Runs of one side of --compare: ``system:partition``, ``system`` or
    ``session:UUID`` (results DB).'''
    if label.startswith('session:'):
        uuid = label.split(':', 1)[1]
        chosen = [r for r in runs if r.session.startswith(uuid)]
    else:
        chosen = analysis.select(runs, system=label)
    if not chosen:
        raise ReportError(f'--compare {label}: no runs match (give '
                          f'system:partition, system, or session:UUID with '
                          f'--db)')
    return chosen


def _comparison(args, runs, headlines, sections, out):
    '''The two sides of ``--compare`` side by side (added to *sections*),
    or None without it.'''
    if not args.compare:
        return None
    label_a, label_b = args.compare
    compared = analysis.compare(_side(runs, label_a),
                                _side(runs, label_b), headlines)
    lines = render.comparison_lines(compared, label_a, label_b)
    sections.append((f'{label_b} vs {label_a}', lines))
    out('')
    out('\n'.join(lines))
    return compared


def _slow_nodes(args, runs, headlines, out):
    '''The "Slow nodes" section (:mod:`hpctestlib_ml.report.nodes`),
    printed where a case was swept over nodes or a run named a slowest
    rank; its parts for report.html.'''
    window = analysis.duration(args.node_window)
    if window is None:
        raise ReportError(f'--node-window {args.node_window}: use 12h, 1d, '
                          f'90m')
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

