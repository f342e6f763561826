"""``hpcml``: the suite's command line.

    hpcml extract WORKLOAD LOGFILE...   metrics of training logs, as JSON
    hpcml cpu-peak                      this CPU's measured fp32 matmul FLOP/s
"""
import argparse
import json
import sys

from hpctestlib_ml.parsers import EXTRACTORS


def _extract(args):
    extractor = EXTRACTORS[args.workload]
    status = 0
    for path in args.logfiles:
        try:
            with open(path, errors='replace') as fp:
                text = fp.read()
        except OSError as err:
            print(f'hpcml extract: cannot read {path}: {err.strerror}',
                  file=sys.stderr)
            status = 1
            continue

        metrics = extractor(text)
        if not metrics.get('steps'):
            print(f'hpcml extract: {path}: no {args.workload} training '
                  f'steps found (is this the log that holds the training '
                  f'lines, e.g. the job\'s stderr?)', file=sys.stderr)
            status = 1
        if len(args.logfiles) > 1:
            metrics = {'file': path, **metrics}
        print(json.dumps(metrics))

    return status


def _cpu_peak(args):
    from hpctestlib_ml import cpu_peak
    flops = cpu_peak.measure_matmul_flops(threads=args.threads)
    print(json.dumps({'fp32_matmul_flops': flops}))
    return 0


def parser():
    top = argparse.ArgumentParser(prog='hpcml', description=__doc__,
                                  formatter_class=argparse.RawTextHelpFormatter)
    commands = top.add_subparsers(dest='command', required=True)

    extract = commands.add_parser(
        'extract', help='print the metrics of training logs as JSON, one '
                        'object per file')
    extract.add_argument('workload', choices=sorted(EXTRACTORS))
    extract.add_argument('logfiles', nargs='+', metavar='LOGFILE')
    extract.set_defaults(func=_extract)

    peak = commands.add_parser(
        'cpu-peak', help="measure this CPU's fp32 matmul FLOP/s")
    peak.add_argument('--threads', type=int, default=None)
    peak.set_defaults(func=_cpu_peak)
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
