"""``hpcml suite``: run the suite with reframe (the local config, the
suite's checks, ``-r`` and a performance report unless the options say
otherwise); exit status 2 when no test case was selected.

ReFrame runs with the warnings that hide a mistake made errors
(:mod:`hpctestlib_ml.strict_reframe`): a check path that does not exist,
a test that fails to load, a ``-S`` name that sets nothing, an unknown
``--mode``, results the database could not store."""
import json
import os
import signal
import subprocess
import sys
import time

from hpctestlib_ml import sessions
from hpctestlib_ml.paths import CHECKS_DIR, CONFIG_DIR, REPORTS_DIR

#: The command's line in ``hpcml --help``.
HELP = ('run the suite with reframe (options are passed on); fails when no '
        'test case was selected')


#: ``hpcml suite``'s own option (not reframe's): run the ``*Container``
#: twins too.
CONTAINERS = '--containers'

#: The part of a twin's name that ``-x`` leaves out.
TWIN = 'Container'


#: What the default session on the local config leaves out: a torchrun
#: that starts one rank, which the one-rank per-task case and the
#: two-rank torchrun case run between them (a ReFrame -x pattern: the
#: display name without blanks).
ONE_RANK_TORCHRUN = '%scale=1_proc%launch_mode=torchrun'

#: The options that select test cases: with any of them, the user's
#: selection stands as given.
SELECTING = ('-n', '--name', '-x', '--exclude', '-t', '--tag', '-T',
             '--exclude-tag', '-p', '--prgenv', '--failed', '--maintainer')

#: What ``hpcml suite --help`` says before reframe's help.
HELP_HEADER = f'''usage: hpcml suite [REFRAME OPTION...]

Runs reframe with the suite's defaults (-C {CONFIG_DIR / 'local.py'},
-c {CHECKS_DIR}, -r, --performance-report) unless the options name
their own, without the *Container twins of the checks unless
{CONTAINERS} (hpcml suite's own option) or -n names them, and, on the
local config with no selection of the user's (-n, -x, -t, ...), without
the one-rank torchrun cases (the quick start: each check in one rank
per task and in two under torchrun), and fails (exit status 1) where plain reframe only warns: a
check path that does not exist, a test that fails to load, a -S name
that sets no variable of the selected tests, an unknown --mode, results
the results database could not store. Exit status 2: no test case was
selected. reframe's options follow.
'''


def add_arguments(parser):
    '''None: every option after ``suite`` is reframe's, and
    :func:`hpctestlib_ml.cli.main` hands them to :func:`run` unparsed (as
    ``args.reframe_args``), so that ``hpcml suite --help`` is reframe's.'''


def _has_option(argv, *names):
    return any(a in names or a.split('=', 1)[0] in names for a in argv)


#: The embedded default configuration.
LOCAL_CONFIG = CONFIG_DIR / 'local.py'


def _option_values(argv, short, long):
    '''The values given with option *short*/*long* (``-C``,
    ``--config-file``) in *argv*, in each of its spellings.'''
    values = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition('=')
        if name in (short, long):
            values.append(value if eq else
                          argv[i + 1] if i + 1 < len(argv) else '')
        elif arg.startswith(short) and len(arg) > 2 and \
                not arg.startswith('--'):
            values.append(arg[2:])
    return values


def _config_files(argv):
    '''The files given with -C/--config-file in *argv*.'''
    return _option_values(argv, '-C', '--config-file')


def leave_out_twins(argv):
    '''Whether the ``*Container`` twins are left out of the session: unless
    *argv* asks for them with :data:`CONTAINERS` or names them with
    ``-n``. So the default session runs the same cases whether or not the
    image exists (config/local.py offers the twins once it does: twice
    the cases, twice the time).'''
    return CONTAINERS not in argv and not any(
        TWIN in pattern for pattern in _option_values(argv, '-n', '--name'))


def suite_command(argv, report_file):
    '''The reframe command line of ``hpcml suite``: the local config, the
    suite's checks and ``-r`` unless *argv* says otherwise; with the local
    config, ``--exec-policy=serial`` unless *argv* names a policy: its
    ``max_jobs: 1`` holds per partition only (ReFrame's asynchronous
    policy counts jobs per partition, and has no limit across them), so
    on a GPU host a ``cpu`` and a ``gpu`` case would run at once, sharing
    the CPUs, the Storage directory and the package power that the GPU
    case's energy counts.'''
    command = [sys.executable, '-m', 'hpctestlib_ml.strict_reframe']
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
    if leave_out_twins(argv):
        command += ['-x', TWIN]
    if local and not _has_option(argv, *SELECTING):
        command += ['-x', ONE_RANK_TORCHRUN]
    return command + ['--report-file', report_file] + [
        arg for arg in argv if arg != CONTAINERS]


def absolute_prefix(argv):
    '''*argv* with the directory of ``--prefix`` made absolute here: the
    site configuration, which ReFrame imports from inside its own
    directory, puts the results database, run reports and reframe.log
    there too (:func:`hpctestlib_ml.siteconfig.results_dir`).'''
    argv = list(argv)
    for i, directory, joined in list(sessions.prefix_options(argv)):
        argv[i] = ('--prefix=' if joined else '') + os.path.abspath(directory)
    return argv


#: The signals that end a session, passed on to ReFrame.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def call_forwarding(command):
    '''Run *command* (ReFrame) in a process group of its own, passing it
    each of :data:`FORWARDED` this process gets (a terminal's Ctrl-C
    reaches this process's group only), once: ``kill`` of this process,
    or a batch system's SIGTERM to it, ends ReFrame's session as ReFrame
    ends it (its jobs cancelled, what it wrote kept) instead of leaving it
    running. A signal ignored when this process started (``nohup``) stays
    ignored. Returns the command's exit status.'''
    proc = subprocess.Popen(command, process_group=0)
    previous = {}

    def forward(signum, frame):
        proc.send_signal(signum)

    for signum in FORWARDED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, forward)
    try:
        return proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run(args):
    '''``hpcml suite``: run reframe; exit status 2 when nothing ran.'''
    argv = absolute_prefix(args.reframe_args)
    prefix = sessions.prefix_asked(argv)
    reports = (os.path.join(os.path.abspath(prefix), 'reports') if prefix
               else REPORTS_DIR)
    report_file = os.path.join(
        reports, f'suite-{time.strftime("%Y%m%dT%H%M%S")}-'
                 f'{os.getpid()}.json')
    if _has_option(argv, '-h', '--help'):
        print(HELP_HEADER)
        sys.stdout.flush()
        return subprocess.call(suite_command(argv, report_file)[:3] +
                               ['--help'])
    command = suite_command(argv, report_file)
    status = call_forwarding(command)
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
