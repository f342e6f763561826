"""``hpcml triage LOGFILE...``: why each training log's run failed, as one
JSON object per file: its category, one-line reason, and the rank and node
where the log names them (:mod:`hpctestlib_ml.triage`)."""
import json
import sys

from hpctestlib_ml import triage
from hpctestlib_ml.commands import read_log

#: The command's line in ``hpcml --help``.
HELP = ('say why training runs failed: one JSON object per log (category, '
        'reason, rank, node)')


def add_arguments(parser):
    '''Logs only: the job state and exit code are in them where known.'''
    parser.add_argument('logfiles', nargs='+', metavar='LOGFILE',
                        help="a job's output (stdout and stderr, or the "
                             'file that holds the failure)')


#: The longest line triage keeps whole (characters): a longer one is kept
#: by its start, where an error says what it is, and the rest read past.
#: A crash can leave gigabytes of NUL bytes with no newline; read whole,
#: 2 GB of them took 4.3 GB and more than five minutes (issue 39).
LINE_LIMIT = 64 << 10


def run(args):
    '''Print each log's triage; exit status 1 if a file cannot be read or
    holds no training log (its reason on stderr), else 0, whatever the
    logs say: the command reports failures, it does not have one. A line
    over :data:`LINE_LIMIT` is read by its start, said on stderr.'''
    status = 0
    for path in args.logfiles:
        read = read_log('triage', path, LINE_LIMIT)
        if read is None:
            status = 1
            continue
        text, cut = read
        found = triage.triage(text)
        if found.category is None and found.reason.startswith(triage.NO_LOG):
            print(f'hpcml triage: {path}: {found.reason}', file=sys.stderr)
            status = 1
        elif cut:
            print(f'hpcml triage: {path}: {cut} line(s) over '
                  f'{LINE_LIMIT >> 10} KiB long read by their first '
                  f'{LINE_LIMIT >> 10} KiB', file=sys.stderr)
        print(json.dumps({'file': path, 'category': found.category,
                          'reason': found.reason, 'rank': found.rank,
                          'node': found.node}))
    return status
