"""``hpcml extract WORKLOAD LOGFILE...``: the metrics of training logs as
JSON, one object per file, read by the parsers the checks use."""
import json
import sys

from hpctestlib_ml import workloads
from hpctestlib_ml.commands import read_logs

#: The command's line in ``hpcml --help``.
HELP = 'print the metrics of training logs as JSON, one object per file'


def add_arguments(parser):
    parser.add_argument('workload', choices=list(workloads.registered()))
    parser.add_argument('logfiles', nargs='+', metavar='LOGFILE')


def _found_figures(metrics):
    '''True if the parser found any figure (a non-zero number) in the log.'''
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) and v
               for v in metrics.values())


def run(args):
    '''Print each log's metrics; exit status 1 if a log cannot be read or
    holds no training figures.'''
    extractor = workloads.get(args.workload).parser.extract_metrics
    logs, all_read = read_logs('extract', args.logfiles)
    status = 0 if all_read else 1
    for path, text in logs:
        metrics = extractor(text)
        if not _found_figures(metrics):
            print(f'hpcml extract: {path}: no {args.workload} training '
                  f'figures found (is this the log that holds the training '
                  f'lines, e.g. the job\'s stderr?)', file=sys.stderr)
            status = 1
        if len(args.logfiles) > 1:
            metrics = {'file': path, **metrics}
        print(json.dumps(metrics))

    return status
