"""``hpcml prepare [WORKLOAD...]``: fetch, once, what workloads read from a
hub, into a directory the jobs read offline (each workload's declaration
says what: :attr:`hpctestlib_ml.registry.Workload.prepare`;
:mod:`hpctestlib_ml.prepare`)."""
import os
import sys

from hpctestlib_ml.paths import PREPARED_DIR, UnwritableDirError, writable_dir

#: The command's line in ``hpcml --help``.
HELP = ('fetch, once, what workloads read from a hub (GPT-2 and '
        'WikiText-2) for offline jobs')


def add_arguments(parser):
    parser.add_argument('workloads', nargs='*', metavar='WORKLOAD',
                        help='default: all')
    parser.add_argument('--dir', help='default: $HPCML_PREPARED_DIR, else '
                                      '<HPCML_VAR_DIR>/prepared')


def prepare(names, root):
    '''Prepare the workloads *names* (all if empty) under *root*:
    [(workload, directories written or why there is nothing to fetch)],
    from each workload's declaration (:mod:`hpctestlib_ml.registry`).'''
    from hpctestlib_ml import registry
    from hpctestlib_ml.prepare import PrepareError
    done = []
    for name in names or list(registry.registered()):
        try:
            declared = registry.get(name)
        except registry.UnknownWorkload as err:
            raise PrepareError(str(err)) from None
        if declared.prepare:
            done.append((name, declared.prepare(root)))
        else:
            done.append((name, f'nothing to fetch: {declared.data}'))
    return done


def run(args):
    '''Prepare the workloads and say what was written where; exit status
    2 on an unknown workload or a fetch that failed, named on stderr.'''
    from hpctestlib_ml.prepare import PrepareError
    root = args.dir or PREPARED_DIR
    if os.path.exists(root) and not os.path.isdir(root):
        print(f'hpcml prepare: error: --dir {root} is a file, not a '
              f'directory: give another --dir', file=sys.stderr)
        return 2
    try:
        # Before a download of minutes, and not blamed on the hub after.
        writable_dir(root, fix='give --dir a directory you may write, or '
                               'set HPCML_PREPARED_DIR')
    except UnwritableDirError as err:
        print(f'hpcml prepare: error: --dir {root}: {err}', file=sys.stderr)
        return 2
    try:
        done = prepare(args.workloads, root)
    except PrepareError as err:
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
