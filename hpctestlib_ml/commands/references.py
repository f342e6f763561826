"""``hpcml references``: derive ReFrame references from the site's history
(:mod:`hpctestlib_ml.history_refs`) and print them, or merge them into the
references files the checks read (``--write``)."""
import os
import sys

from hpctestlib_ml.commands import counting
from hpctestlib_ml.commands.report import (add_history_arguments, load,
                                          with_prefix)
from hpctestlib_ml.history_refs import ReferencesError
from hpctestlib_ml.history_refs.derive import (DEFAULT_LAST,
                                               DEFAULT_MIN_RUNS, derive)
from hpctestlib_ml.history_refs.lookup import (NOISE_FLOOR_EXTRA,
                                               references_file)
from hpctestlib_ml.history_refs.store import merge_into_file, preview
from hpctestlib_ml.paths import REFERENCES_DIR
from hpctestlib_ml.report import analysis, history
from hpctestlib_ml.report.analysis import ReportError

#: The command's line in ``hpcml --help``.
HELP = ("ReFrame references from this site's own history (median of the "
        'last N passing runs, thresholds from their spread)')


def add_arguments(parser):
    add_history_arguments(parser, system_required=True)
    parser.add_argument('--last', type=counting(), default=DEFAULT_LAST,
                        metavar='N', help='passing runs in the median '
                                          f'(default {DEFAULT_LAST})')
    parser.add_argument('--min-runs', type=counting(), default=DEFAULT_MIN_RUNS,
                        metavar='N', help='passing runs a case needs '
                                          f'(default {DEFAULT_MIN_RUNS})')
    parser.add_argument('--write', nargs='?', const=str(REFERENCES_DIR),
                        metavar='DIR|FILE',
                        help='merge into the references files (default '
                             'directory: the one the checks read, '
                             'HPCML_REFERENCES_DIR or config/references); '
                             'without it, print what would be written')


def run(args, out=print):
    '''``hpcml references``; returns the exit status (2 on bad input,
    named on stderr).'''
    try:
        return _references(with_prefix(args), out)
    except (ReferencesError, ReportError) as err:
        print(f'hpcml references: error: {err}', file=sys.stderr)
        return 2


def single_session_advice(ref):
    '''What a single session's references rest on, and how to do
    better.'''
    if ref.floor_from.startswith('the default'):
        return (f'its thresholds are no narrower than {ref.floor_from}: '
                f"declare the partition's extras['{NOISE_FLOOR_EXTRA}'] (the "
                f'noise it sees night to night), or derive them again after '
                f'runs on several nights')
    return (f'its thresholds are no narrower than {ref.floor_from}; '
            f'derive them again after runs on several nights')


def committed_source(files, results_dir):
    '''Where the runs of *files* (perflogs, results databases, database
    URLs) came from, as a references file that a site commits may say
    it: each perflog directory or database under *results_dir* (the
    ``--prefix``), relative to it (``perflogs/local/cpu``, the same on
    every machine that runs the suite); what lies elsewhere, or a
    time-series database's URL, is left out: it names one machine's paths
    (a home, a scratch directory) or one service, which mean nothing in a
    shared repository, and the runs' dates and sessions, which the
    references file keeps, identify them. '' where nothing is left.'''
    root = os.path.realpath(results_dir)
    kept = set()
    for name in files:
        if '://' in name:
            continue
        if history.is_perflog(name):
            name = os.path.dirname(name)
        real = os.path.realpath(name)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            kept.add(os.path.relpath(real, root))
    return ', '.join(sorted(kept))


def _targets(references, write):
    '''Workload -> the references file its entries go to: ``<write>/
    <workload>.yaml`` for a directory, *write* itself for a ``.yaml`` file
    (then every entry must be of one workload).'''
    workloads = sorted({r.workload for r in references})
    if write.endswith(('.yaml', '.yml')) and not os.path.isdir(write):
        if len(workloads) > 1:
            raise ReferencesError(
                f'--write {write}: one file, but the runs are of '
                f'{len(workloads)} workloads ({", ".join(workloads)}): pass '
                f'--workload NAME, or a directory to --write')
        return {w: write for w in workloads}
    if not os.path.isdir(write):
        raise ReferencesError(f'--write {write}: no such directory (give the '
                              f'references directory, or a .yaml file)')
    return {w: references_file(w, write) for w in workloads}


def _references(args, out):
    '''The command (:func:`run`), raising on bad input.'''
    since = analysis.parse_since(args.since) if args.since else None
    if args.last < 2 or args.min_runs < 2:
        raise ReferencesError('--last and --min-runs must be at least 2: a '
                              'spread needs two runs')
    selected = load(args, analysis.load_weights(), since, last=args.last)
    data, runs = selected.data, selected.runs
    for line in data.unreadable_lines_of_files('references'):
        print(line, file=sys.stderr)
    chosen = (len(runs) if selected.totals is None else
              sum(t.runs for t in selected.totals.values()))
    skipped = (f'; {data.skipped_text()}' if data.unreadable_lines else '')
    out(f'{chosen} runs of {args.system} selected of {selected.read} '
        f'read from {len(data.files)} files{skipped}')
    if not selected.read:
        raise ReferencesError(data.nothing_read())
    if not runs:
        raise ReferencesError(
            f'no runs of {args.system} in {", ".join(data.files) or "the input"}'
            f' (--system takes system or system:partition as the perflogs '
            f'name them; check --since and --workload){skipped}')
    source = committed_source(data.files, args.prefix)
    refs, notes = derive(runs, args.last, args.min_runs, source,
                         selected.totals, selected.unkeyed)
    for note in notes:
        out(f'  {note}')
    if not any(r.metrics for r in refs):
        raise ReferencesError(
            f'no case of {args.system} has {args.min_runs} passing runs with '
            f'figures: run the suite more often, or lower --min-runs')
    for ref in refs:
        spread = ', '.join(f'{n} {100 * s:.1f}%' for n, s in
                           sorted(ref.spreads.items()))
        out(f'{ref.check} {ref.partition} {ref.case!r}: {ref.runs} runs, '
            f'{ref.sessions_text()}; robust spread: {spread}; '
            f'{ref.thresholds_text()}')
        for stack in ref.answers.values():
            out(f'  known-good answer {stack["digest"]} ({stack["runs"]} '
                f'passing runs) of the stack {stack["stack"]}')
        if ref.single_session and ref.metrics:
            out(f'  note: {ref.check} {ref.partition} {ref.case!r}: '
                f'references from a single session; nights apart its '
                f'figures move more than in one sitting: '
                + single_session_advice(ref))
    if not args.write:
        out('')
        out(preview(refs))
        out('(not written: pass --write [DIR|FILE] to merge these into the '
            'references files the checks read)')
        return 0
    for workload, path in sorted(_targets(refs, args.write).items()):
        chosen = [r for r in refs if r.workload == workload]
        for line in merge_into_file(path, workload, chosen):
            out(f'  {path}: {line}')
    return 0
