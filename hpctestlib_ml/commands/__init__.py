"""The subcommands of ``hpcml``, one module each.

Every module has ``HELP`` (its line in ``hpcml --help``),
``add_arguments(parser)`` and ``run(args)``, which returns the exit status
and says what went wrong on stderr as ``hpcml <command>: ...``; a
command that reads logs reads them with :func:`read_logs` (``hpcml
triage`` with :func:`read_log` and a line limit).
:mod:`hpctestlib_ml.cli` only registers them.
"""
import argparse
import sys

from hpctestlib_ml.counts import count


def counting(minimum=1):
    '''An argparse ``type`` for a count: an integer >= *minimum*
    (:func:`hpctestlib_ml.counts.count`); anything else is argparse's
    one-line error naming the option and the value.'''
    def as_count(text):
        number = count(text, minimum)
        if number is None:
            raise argparse.ArgumentTypeError(
                f'must be an integer >= {minimum}, got {text!r}')
        return number
    as_count.__name__ = f'integer >= {minimum}'
    return as_count


def read_logs(command, paths):
    '''``(logs, all_read)``: (path, text) of each of *paths* that can be
    read (:func:`read_log`), and whether all could.'''
    logs = [(path, read_log(command, path)) for path in paths]
    return ([(p, t) for p, t in logs if t is not None],
            all(t is not None for _, t in logs))


def read_log(command, path, line_limit=None):
    '''The text of log *path* (undecodable bytes replaced: a log is read
    for its lines, whatever else it holds), or None where it cannot be
    read, said on stderr as ``hpcml COMMAND: cannot read PATH: why``.
    With *line_limit*: (the text, each line longer than that many
    characters cut to them, in memory the limit bounds; the lines cut).'''
    try:
        with open(path, errors='replace') as fp:
            return fp.read() if line_limit is None else \
                _bounded_text(fp, line_limit)
    except OSError as err:
        print(f'hpcml {command}: cannot read {path}: {err.strerror}',
              file=sys.stderr)
        return None


def _bounded_text(fp, limit):
    '''(the text of *fp*, each line longer than *limit* characters cut to
    them, the lines cut).'''
    lines, cut = [], 0
    while True:
        line = fp.readline(limit + 1)
        if not line:
            return ''.join(lines), cut
        if len(line) > limit and not line.endswith('\n'):
            cut += 1
            lines.append(line[:limit] + '\n')
            while line and not line.endswith('\n'):
                line = fp.readline(1 << 20)
        else:
            lines.append(line)
