"""``hpcml``: the suite's command line, one subcommand per module of
:mod:`hpctestlib_ml.commands` (:data:`COMMANDS`). ``hpcml --help`` lists
them from :data:`COMMANDS`, each with its module's ``HELP``, so that a
command added there is listed; ``hpcml COMMAND --help`` gives its
options (``hpcml suite --help`` is ReFrame's).
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


#: ``hpcml --help``'s text above the commands (which it lists from
#: :data:`COMMANDS`).
DESCRIPTION = ("hpcml: the suite's command line. Each command has its own "
               'options: hpcml COMMAND --help (hpcml suite passes every '
               "option after it to ReFrame: hpcml suite --help is ReFrame's).")


def parser():
    top = argparse.ArgumentParser(prog='hpcml', description=DESCRIPTION)
    subparsers = top.add_subparsers(dest='command', required=True,
                                    title='commands', metavar='COMMAND')
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
