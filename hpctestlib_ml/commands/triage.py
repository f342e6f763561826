"""``hpcml triage LOGFILE...``: why each training log's run failed, as one
JSON object per file: its category, one-line reason, and the rank and node
where the log names them (:mod:`hpctestlib_ml.triage`)."""
import json
import sys

from hpctestlib_ml import triage
from hpctestlib_ml.commands import read_logs

#: The command's line in ``hpcml --help``.
HELP = ('say why training runs failed: one JSON object per log (category, '
        'reason, rank, node)')


def add_arguments(parser):
    '''Logs only: the job state and exit code are in them where known.'''
    parser.add_argument('logfiles', nargs='+', metavar='LOGFILE',
                        help="a job's output (stdout and stderr, or the "
                             'file that holds the failure)')


def run(args):
    '''Print each log's triage; exit status 1 if a file cannot be read or
    holds no training log (its reason on stderr), else 0, whatever the
    logs say: the command reports failures, it does not have one.'''
    logs, status = read_logs('triage', args.logfiles)
    status = 0 if status else 1
    for path, text in logs:
        found = triage.triage(text)
        if found.category is None and found.reason.startswith(triage.NO_LOG):
            print(f'hpcml triage: {path}: {found.reason}', file=sys.stderr)
            status = 1
        print(json.dumps({'file': path, 'category': found.category,
                          'reason': found.reason, 'rank': found.rank,
                          'node': found.node}))
    return status
