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
    hpcml report [--perflogs DIR...]    the history: each case's figures,
                                        what changed and since when, slow
                                        nodes, failures (text, HTML)
    hpcml references --system S         ReFrame references from the site's
                                        own history
    hpcml changes FILE.csv...           the report's change detector on any
                                        series: shifts, changes of spread,
                                        outliers, silences (JSON per event)
    hpcml triage LOGFILE...             why training runs failed: category,
                                        reason, rank, node (JSON per file)
    hpcml new-workload NAME [--check C] a new workload from the template, as
                                        new files (docs: adding a workload)
    hpcml image [--base IMAGE]          build the suite's container image
                                        (make image): Podman, else Apptainer
"""
import argparse
import importlib
import os
import signal
import sys

#: The subcommands, in ``hpcml --help``'s order: name -> module under
#: :mod:`hpctestlib_ml.commands` (``HELP``, ``add_arguments``, ``run``).
#: Imported when used: ``hpcml suite`` starts reframe without the others.
COMMANDS = {
    'suite': 'suite', 'extract': 'extract', 'cpu-peak': 'cpu_peak',
    'model-info': 'model_info', 'compliance': 'compliance',
    'prepare': 'prepare', 'report': 'report', 'references': 'references',
    'changes': 'changes',
    'triage': 'triage', 'new-workload': 'new_workload', 'image': 'image',
}


def command(name):
    '''The module of subcommand *name*.'''
    return importlib.import_module(f'hpctestlib_ml.commands.{COMMANDS[name]}')


def parser():
    top = argparse.ArgumentParser(prog='hpcml', description=__doc__,
                                  formatter_class=argparse.RawTextHelpFormatter)
    subparsers = top.add_subparsers(dest='command', required=True)
    for name in COMMANDS:
        module = command(name)
        sub = subparsers.add_parser(name, help=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(func=module.run)
    return top


#: The exit status of a command whose reader closed its output (``hpcml
#: report | head -1``): a shell's for a process ended by SIGPIPE.
CLOSED_PIPE_STATUS = 128 + signal.SIGPIPE


def main(argv=None):
    '''Run the command *argv* names; its exit status. Where the reader of
    its output goes away, the command ends quietly, as ``cat`` does
    (:data:`CLOSED_PIPE_STATUS`), not with a traceback.'''
    try:
        status = _main(argv)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # Python's advice (the signal module's notes on SIGPIPE): point
        # stdout at devnull, so that flushing it at exit does not raise
        # again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CLOSED_PIPE_STATUS


def _main(argv):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['suite']:
        # Every option after 'suite' is reframe's, --help included.
        return command('suite').run(argparse.Namespace(reframe_args=argv[1:]))

    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
