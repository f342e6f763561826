"""``hpcml``: the suite's command line.

    hpcml suite [REFRAME OPTION...]     run the suite (reframe -C config/local.py
                                        -c checks -r --performance-report ...);
                                        fails if no test case ran
    hpcml extract WORKLOAD LOGFILE...   metrics of training logs, as JSON
    hpcml cpu-peak                      this CPU's measured fp32 matmul FLOP/s
    hpcml model-info WORKLOAD [--size S] [--json] [--memory [--layout
                       TPxPPxDP --batch B --precision P]]
                                        parameters and forward FLOPs of the
                                        model a workload's program builds
    hpcml compliance LOGFILE...         MLPerf's compliance checker on
                                        MLLOG logs; exit 1 on a violation
    hpcml prepare [WORKLOAD...] [--dir DIR]
                                        fetch what workloads would take
                                        from a hub (run where it is reachable)
"""
import argparse
import json
import os
import subprocess
import sys
import time

from hpctestlib_ml.parsers import EXTRACTORS
from hpctestlib_ml.paths import CHECKS_DIR, CONFIG_DIR, PREPARED_DIR, REPORTS_DIR


def _found_figures(metrics):
    '''True if the parser found any figure (a non-zero number) in the log.'''
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) and v
               for v in metrics.values())


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
        if not _found_figures(metrics):
            print(f'hpcml extract: {path}: no {args.workload} training '
                  f'figures found (is this the log that holds the training '
                  f'lines, e.g. the job\'s stderr?)', file=sys.stderr)
            status = 1
        if len(args.logfiles) > 1:
            metrics = {'file': path, **metrics}
        print(json.dumps(metrics))

    return status


def _has_option(argv, *names):
    return any(a in names or a.split('=', 1)[0] in names for a in argv)


def suite_command(argv, report_file):
    '''The reframe command line of ``hpcml suite``: the local config, the
    suite's checks and ``-r`` unless *argv* says otherwise.'''
    command = [os.path.join(os.path.dirname(sys.executable), 'reframe')]
    if not _has_option(argv, '-C', '--config-file'):
        command += ['-C', str(CONFIG_DIR / 'local.py')]
    if not _has_option(argv, '-c', '--checkpath'):
        command += ['-c', str(CHECKS_DIR)]
    actions = ('-r', '--run', '-l', '--list', '-L', '--list-detailed',
               '--dry-run', '--list-tags', '--describe', '--ci-generate')
    if not _has_option(argv, *actions):
        command.append('-r')
    if not _has_option(argv, '--performance-report'):
        command.append('--performance-report')
    return command + ['--report-file', report_file] + list(argv)


def suite(reframe_args):
    '''``hpcml suite``: run reframe; exit status 2 when nothing ran.'''
    report_file = os.path.join(
        REPORTS_DIR, f'suite-{time.strftime("%Y%m%dT%H%M%S")}-'
                     f'{os.getpid()}.json')
    command = suite_command(reframe_args, report_file)
    status = subprocess.call(command)
    if status != 0 or not _has_option(command, '-r', '--run', '--dry-run'):
        return status

    # ReFrame writes no report for an empty session.
    num_cases = 0
    if os.path.exists(report_file):
        try:
            with open(report_file) as fp:
                num_cases = json.load(fp)['session_info']['num_cases']
        except (OSError, ValueError, KeyError) as err:
            print(f'hpcml suite: cannot read the run report {report_file}: '
                  f'{err}', file=sys.stderr)
            return 1

    if num_cases == 0:
        print('hpcml suite: no test case was selected: check the -n/-t/-x '
              'filters, --system, and the scales the partition runs '
              "(extras['scales'] in the site config)", file=sys.stderr)
        return 2

    return 0


def _cpu_peak(args):
    from hpctestlib_ml import cpu_peak
    flops = cpu_peak.measure_matmul_flops(threads=args.threads)
    print(json.dumps({'fp32_matmul_flops': flops}))
    return 0


def _model_info(args):
    from hpctestlib_ml import memory_estimate, model_info
    estimate = None
    try:
        if args.memory:
            layout = None
            if args.layout:
                try:
                    layout = tuple(int(n) for n in
                                   args.layout.lower().split('x'))
                    assert len(layout) == 3 and min(layout) >= 1
                except (ValueError, AssertionError):
                    raise model_info.ModelInfoError(
                        f'--layout {args.layout!r}: use TPxPPxDP, e.g. '
                        f'2x2x44') from None
            info, estimate = model_info.memory_info(
                args.workload, args.size, layout, args.batch, args.precision)
        else:
            info = model_info.model_info(args.workload, args.size,
                                         args.device)
    except model_info.ModelInfoError as err:
        print(f'hpcml model-info: error: {err}', file=sys.stderr)
        return 2
    if args.json:
        data = info.as_dict()
        if estimate is not None:
            data['memory'] = estimate.as_dict()
        print(json.dumps(data))
    else:
        print(model_info.format_info(info))
        if estimate is not None:
            print(memory_estimate.format_estimate(estimate))
    return 0


def _compliance(args):
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
            report = compliance.check(text, usage=args.usage,
                                      ruleset=args.ruleset)
        except (OSError, ValueError) as err:
            print(f'hpcml compliance: {path}: {err}', file=sys.stderr)
            status = 2
            continue
        verdict = ('passed' if report.passed else
                   'violations' if report.violations else
                   'passed but for what only a full run on the '
                   "benchmark's data meets")
        print(f'{path}: {report.usage} {report.ruleset}: {verdict}')
        for finding in report.findings:
            kind = ('full run only' if finding.run_length_only else
                    'VIOLATION')
            first = finding.message.strip().splitlines()[0]
            print(f'  {kind}: {first}')
        if report.violations:
            status = max(status, 1)
    return status


def _prepare(args):
    from hpctestlib_ml import prepare
    root = args.dir or PREPARED_DIR
    try:
        done = prepare.prepare(args.workloads, root)
    except prepare.PrepareError as err:
        print(f'hpcml prepare: error: {err}', file=sys.stderr)
        return 2
    for workload, result in done:
        if isinstance(result, str):
            print(f'{workload}: {result}')
        else:
            print(f'{workload}: ' + ', '.join(map(str, result)))
    print(f'prepared under {root}: jobs read it offline (set '
          f'HPCML_PREPARED_DIR or a partition\'s extras[\'prepared_dir\'] '
          f'to it where it is not the default)')
    return 0


def _report(args):
    from hpctestlib_ml import report
    try:
        return report.run(args)
    except report.ReportError as err:
        print(f'hpcml report: error: {err}', file=sys.stderr)
        return 2


def parser():
    top = argparse.ArgumentParser(prog='hpcml', description=__doc__,
                                  formatter_class=argparse.RawTextHelpFormatter)
    commands = top.add_subparsers(dest='command', required=True)

    # Parsed by main() itself: every option after 'suite' is reframe's.
    commands.add_parser(
        'suite', help='run the suite with reframe (options are passed on); '
                      'fails when no test case was selected')

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

    info = commands.add_parser(
        'model-info', help='parameters, analytic and measured forward FLOPs '
                           'of the model a workload builds (offline)')
    from hpctestlib_ml.model_info import WORKLOADS
    info.add_argument('workload', choices=sorted(WORKLOADS))
    info.add_argument('--size', default='benchmark',
                      help='tiny, benchmark (default), or a model name the '
                           'program takes (megatron: 800M, 13B, 175B, '
                           'llama3-8B, llama3-70B; clip: an OpenCLIP '
                           'model; gpt2_finetune: gpt2)')
    info.add_argument('--device', choices=('cpu', 'meta'),
                      help='where to build the model (default: meta for '
                           'the large ones); FLOPs are counted on meta')
    info.add_argument('--memory', action='store_true',
                      help='also the per-device memory estimate: weights, '
                           'gradients, optimizer, activations (GiB)')
    info.add_argument('--layout', metavar='TPxPPxDP',
                      help='with --memory, megatron: parallel layout '
                           "(default: the size's TP and PP, DP 1)")
    info.add_argument('--batch', type=int, metavar='B',
                      help='with --memory: (micro) batch per device')
    info.add_argument('--precision', choices=('fp32', 'fp16', 'bf16'),
                      help='with --memory (megatron default: CARAML\'s, '
                           'fp16 for 800M/13B, bf16 for 175B)')
    info.add_argument('--json', action='store_true',
                      help='one JSON object: params, analytic_forward_flops,'
                           ' measured_forward_flops, ...')
    info.set_defaults(func=_model_info)

    check = commands.add_parser(
        'compliance', help="MLPerf's compliance checker on MLLOG logs: "
                           'violations, and what only a full run meets')
    check.add_argument('logfiles', nargs='+', metavar='LOGFILE')
    check.add_argument('--usage', choices=('hpc', 'training'),
                       help='default: from the log\'s submission_benchmark')
    check.add_argument('--ruleset', help='e.g. 3.0.0 (hpc), 5.0.0 '
                                         '(training)')
    check.set_defaults(func=_compliance)

    prep = commands.add_parser(
        'prepare', help='fetch, once, what workloads read from a hub '
                        '(GPT-2 and WikiText-2) for offline jobs')
    prep.add_argument('workloads', nargs='*', metavar='WORKLOAD',
                      help='default: all')
    prep.add_argument('--dir', help='default: $HPCML_PREPARED_DIR, else '
                                    '<HPCML_VAR_DIR>/prepared')
    prep.set_defaults(func=_prepare)

    from hpctestlib_ml.report import add_arguments
    report = commands.add_parser(
        'report', help='tables, score against a baseline, comparisons and '
                       'figures from perflogs and the results DB')
    add_arguments(report)
    report.set_defaults(func=_report)

    from hpctestlib_ml.commands import references
    refs = commands.add_parser('references', help=references.HELP)
    references.add_arguments(refs)
    refs.set_defaults(func=references.run)
    return top


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['suite']:
        return suite(argv[1:])

    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
