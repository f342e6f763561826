"""``hpcml compliance LOGFILE...``: MLPerf's compliance checker on MLLOG
logs; exit status 1 on a violation.

A log whose run did not end (``run_stop`` says ``aborted``, the log is cut
in the middle of a record or has no ``run_stop``, the run failed:
:mod:`hpctestlib_ml.run_end`) is no run to check: it is refused in one
line that says what the log shows, as ``hpcml extract`` refuses it;
``--partial`` checks what the log holds all the same."""
import sys

from hpctestlib_ml import run_end

#: The command's line in ``hpcml --help``.
HELP = ("MLPerf's compliance checker on MLLOG logs: violations, and what "
        'only a full run meets')


def add_arguments(parser):
    parser.add_argument('logfiles', nargs='+', metavar='LOGFILE')
    parser.add_argument('--usage', choices=('hpc', 'training'),
                        help='default: from the log\'s submission_benchmark')
    parser.add_argument('--ruleset', help='e.g. 3.0.0 (hpc), 5.0.0 '
                                          '(training)')
    parser.add_argument('--partial', action='store_true',
                        help='check the log of a run that did not end '
                             '(aborted, cut, failed) all the same, saying '
                             'so, instead of refusing it')


def _print_report(path, report, end=None):
    '''The verdict on one log (of a run that ended as *end*, an
    :class:`~hpctestlib_ml.run_end.End`, where it did not), then a line
    per finding.'''
    verdict = ('passed' if report.passed else
               'violations' if report.violations else
               'passed but for what only a full run on the '
               "benchmark's data meets")
    if end:
        verdict += f' (partial: {run_end.describe(end)})'
    print(f'{path}: {report.usage} {report.ruleset}: {verdict}')
    for finding in report.findings:
        kind = ('full run only' if finding.run_length_only else
                'VIOLATION')
        first = finding.message.strip().splitlines()[0]
        print(f'  {kind}: {first}')


def run(args):
    '''Check each log; exit status 1 on a violation, 2 on a log that
    cannot be read or checked, or whose run did not end (unless
    --partial), or on --usage without --ruleset.'''
    from hpctestlib_ml import compliance
    if bool(args.usage) != bool(args.ruleset):
        print('hpcml compliance: error: give --usage and --ruleset together '
              '(or neither: the benchmark\'s rules)', file=sys.stderr)
        return 2
    status = 0
    for path in args.logfiles:
        try:
            with open(path, errors='replace') as fp:
                text = fp.read()
            end = (run_end.unended(text, run_end.MLLOG)
                   if compliance.mllog_lines(text) else None)
            if end and not args.partial:
                print(run_end.refusal(path, 'compliance', end)
                      + ' (--partial checks it all the same)',
                      file=sys.stderr)
                status = 2
                continue
            report = compliance.check(text, usage=args.usage,
                                      ruleset=args.ruleset)
        except (OSError, ValueError) as err:
            print(f'hpcml compliance: {path}: {err}', file=sys.stderr)
            status = 2
            continue
        _print_report(path, report, end)
        if report.violations:
            status = max(status, 1)
    return status
