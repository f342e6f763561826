"""``hpcml suite``: run the suite with reframe (the local config, the
suite's checks, ``-r`` and a performance report unless the options say
otherwise); exit status 2 when no test case was selected."""
import json
import os
import subprocess
import sys
import time

from hpctestlib_ml.paths import CHECKS_DIR, CONFIG_DIR, REPORTS_DIR

#: The command's line in ``hpcml --help``.
HELP = ('run the suite with reframe (options are passed on); fails when no '
        'test case was selected')


def add_arguments(parser):
    '''None: every option after ``suite`` is reframe's, and
    :func:`hpctestlib_ml.cli.main` hands them to :func:`run` unparsed (as
    ``args.reframe_args``), so that ``hpcml suite --help`` is reframe's.'''


def _has_option(argv, *names):
    return any(a in names or a.split('=', 1)[0] in names for a in argv)


#: The embedded default configuration.
LOCAL_CONFIG = CONFIG_DIR / 'local.py'


def _config_files(argv):
    '''The files given with -C/--config-file in *argv*.'''
    files = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition('=')
        if name in ('-C', '--config-file'):
            files.append(value if eq else
                         argv[i + 1] if i + 1 < len(argv) else '')
        elif arg.startswith('-C') and len(arg) > 2:
            files.append(arg[2:])
    return files


def suite_command(argv, report_file):
    '''The reframe command line of ``hpcml suite``: the local config, the
    suite's checks and ``-r`` unless *argv* says otherwise; with the local
    config, ``--exec-policy=serial`` unless *argv* names a policy: its
    ``max_jobs: 1`` holds per partition only (ReFrame's asynchronous
    policy counts jobs per partition, and has no limit across them), so
    on a GPU host a ``cpu`` and a ``gpu`` case would run at once, sharing
    the CPUs, the Storage directory and the package power that the GPU
    case's energy counts.'''
    command = [os.path.join(os.path.dirname(sys.executable), 'reframe')]
    configs = _config_files(argv)
    if not configs:
        command += ['-C', str(LOCAL_CONFIG)]
    local = not configs or any(
        c and os.path.realpath(c) == os.path.realpath(LOCAL_CONFIG)
        for c in configs)
    if local and not _has_option(argv, '--exec-policy'):
        command.append('--exec-policy=serial')
    if not _has_option(argv, '-c', '--checkpath'):
        command += ['-c', str(CHECKS_DIR)]
    actions = ('-r', '--run', '-l', '--list', '-L', '--list-detailed',
               '--dry-run', '--list-tags', '--describe', '--ci-generate')
    if not _has_option(argv, *actions):
        command.append('-r')
    if not _has_option(argv, '--performance-report'):
        command.append('--performance-report')
    return command + ['--report-file', report_file] + list(argv)


def run(args):
    '''``hpcml suite``: run reframe; exit status 2 when nothing ran.'''
    report_file = os.path.join(
        REPORTS_DIR, f'suite-{time.strftime("%Y%m%dT%H%M%S")}-'
                     f'{os.getpid()}.json')
    command = suite_command(args.reframe_args, report_file)
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
