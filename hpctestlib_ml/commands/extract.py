"""``hpcml extract WORKLOAD LOGFILE...``: the metrics of training logs as
JSON, one object per file, read by the parsers the checks use.

A log whose run did not end (it failed, was aborted, stopped before its
first measured step or never reached its end record:
:mod:`hpctestlib_ml.run_end`) is no result: it is refused in one line that
says what the log shows, unless ``--partial`` asks for what could be read,
printed with ``"partial": true`` and why."""
import json
import sys

from hpctestlib_ml import registry, run_end
from hpctestlib_ml.commands import read_logs

#: The command's line in ``hpcml --help``.
HELP = 'print the metrics of training logs as JSON, one object per file'


def add_arguments(parser):
    parser.add_argument('workload', choices=list(registry.registered()))
    parser.add_argument('logfiles', nargs='+', metavar='LOGFILE')
    parser.add_argument(
        '--partial', action='store_true',
        help='print the figures of a log whose run did not end (failed, '
             'aborted, cut, stopped before its first measured step) with '
             '"partial": true and "partial_reason", instead of refusing it')


def _found_figures(metrics):
    '''True if the parser found any figure (a non-zero number) in the log.'''
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) and v
               for v in metrics.values())


def _other_workload(name, metrics):
    '''The workload whose log *metrics* are where the log names its
    MLPerf benchmark (``submission_benchmark``) and it is not workload
    *name*'s: ``(workload, benchmark)``; None where it is, or the log
    names none.'''
    logged = metrics.get('benchmark')
    if not logged or logged == registry.get(name).benchmark:
        return None
    owner = next((w for w, declared in registry.registered().items()
                  if declared.benchmark == logged), None)
    return owner, logged


def run(args):
    '''Print each log's metrics; exit status 1 if a log cannot be read,
    holds no training figures, is another workload's log or shows a run
    that did not end (not printed; printed marked partial with
    ``--partial``).'''
    parser = registry.get(args.workload).parser
    extractor = parser.extract_metrics
    logs, all_read = read_logs('extract', args.logfiles)
    status = 0 if all_read else 1
    for path, text in logs:
        metrics = extractor(text)
        other = _other_workload(args.workload, metrics)
        if other:
            owner, logged = other
            fix = (f'hpcml extract {owner} {path}' if owner else
                   'a workload whose program logs it')
            print(f'hpcml extract: {path}: the log of MLPerf benchmark '
                  f'{logged!r} (its submission_benchmark), not of '
                  f'{args.workload}: use {fix}', file=sys.stderr)
            status = 1
            continue
        end = run_end.unended(text, parser.__name__.rsplit('.', 1)[-1])
        if end and not args.partial:
            print(run_end.refusal(path, 'extract', end)
                  + ' (--partial prints what could be read)',
                  file=sys.stderr)
            status = 1
            continue
        if not _found_figures(metrics):
            print(f'hpcml extract: {path}: no {args.workload} training '
                  f'figures found (is this the log that holds the training '
                  f'lines, e.g. the job\'s stderr?)', file=sys.stderr)
            status = 1
        elif end:
            print(f'hpcml extract: {path}: warning: partial figures, '
                  f'{run_end.describe(end)}', file=sys.stderr)
        if end:
            metrics = {'partial': True, 'partial_reason':
                       f'{end.kind}: {end.reason}', **metrics}
        if len(args.logfiles) > 1:
            metrics = {'file': path, **metrics}
        print(json.dumps(metrics))

    return status
