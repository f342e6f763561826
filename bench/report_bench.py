"""How long ``hpcml report`` takes on a large history, and how much memory.

    .venv/bin/python bench/report_bench.py [--days 400]
    .venv/bin/python bench/report_bench.py --scale [--nodes 1000 6000]

Without ``--scale``: perflogs of two systems x three workloads x four
scales, one run per case per day (``--days 400``: 9,630 lines with
failures, two header generations and dry-run lines;
tests/perflog_history.py), timed as a user runs the report: tables, score
against a baseline, a comparison, and with ``--out`` the figures and the
HTML page, each through the history store (``HPCML_HISTORY_STORE``, up to
date) and line by line (``off``).

``--scale``: the nightly report (tables, change detection, slow nodes:
``--no-plots``) on the 9,630-line history and on node-sweep histories of a
year (``--distribute=all``: one line per node per night for each swept
check; ``--checks`` of them): the first report (which builds the store),
the nightly report with the store up to date, then one more night
appended (the store reads it: the update's seconds, and the report);
wall seconds and peak memory (max RSS) of each ``hpcml report`` process.
Line by line only up to ``--line-by-line-max`` lines (it needs about
2 KB a line).
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / 'tests'))
from perflog_history import generate, generate_sweeps  # noqa: E402


def timed(args, env):
    '''(wall seconds, peak RSS in GB) of one ``hpcml report``.'''
    start = time.perf_counter()
    proc = subprocess.Popen([str(REPO / '.venv/bin/hpcml'), 'report', *args],
                            env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        sys.exit(proc.stderr.read())
    return wall, usage.ru_maxrss / 1024 ** 2


def figures_table(days):
    with tempfile.TemporaryDirectory() as tmp:
        lines = generate(os.path.join(tmp, 'perflogs'), days=days)
        logs = ['--perflogs', os.path.join(tmp, 'perflogs')]
        figures = [
            ('tables only', logs + ['--no-plots']),
            ('save a baseline', logs + ['--system', 'booster:gpu',
                                        '--save-baseline', 'b', '--no-plots']),
            ('score against it', logs + ['--system', 'newcluster:gpu',
                                         '--baseline', 'b', '--no-plots']),
            ('tables, comparison, figures and HTML',
             logs + ['--compare', 'booster:gpu', 'newcluster:gpu',
                     '--out', os.path.join(tmp, 'out')]),
        ]
        print(f'{lines} perflog lines; wall seconds per hpcml report '
              f'(process start included), store up to date / line by line:')
        for store in (os.path.join(tmp, 'stores'), 'off'):
            env = {**os.environ, 'HPCML_VAR_DIR': tmp,
                   'HPCML_HISTORY_STORE': store}
            timed(logs + ['--no-plots'], env)      # builds the store
            for name, report_args in figures:
                wall, rss = timed(report_args, env)
                print(f'  {name:<40} {wall:6.2f} s  {rss:5.2f} GB  '
                      f'({"store" if store != "off" else "line by line"})')


def scale_row(label, logs, lines, append, env, line_by_line):
    '''One history's row: first report, nightly report, a night appended.'''
    args = ['--perflogs', logs, '--no-plots']
    first = timed(args, env)
    nightly = timed(args, env)
    added = append()
    import importlib
    os.environ['HPCML_HISTORY_STORE'] = env['HPCML_HISTORY_STORE']
    from hpctestlib_ml.report import store
    importlib.reload(store)
    start = time.perf_counter()
    with store.open_store(logs):
        pass
    update = time.perf_counter() - start
    after = timed(args, env)
    slow = timed(args, {**env, 'HPCML_HISTORY_STORE': 'off'}) \
        if line_by_line else None
    cells = [label, f'{lines:,}', f'{first[0]:.1f} s / {first[1]:.2f} GB',
             f'{nightly[0]:.2f} s / {nightly[1]:.2f} GB',
             f'{added:,} lines: {update:.2f} s, report {after[0]:.2f} s',
             f'{slow[0]:.1f} s / {slow[1]:.2f} GB' if slow else '-']
    print('| ' + ' | '.join(cells) + ' |', flush=True)
    return nightly


def scale(args):
    print('| history | perflog lines | first report (builds the store) | '
          'nightly report, store up to date | a night appended: store '
          'update, report | line by line (store off) |')
    print('| --- | --- | --- | --- | --- | --- |')
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        env = {**os.environ, 'HPCML_VAR_DIR': tmp,
               'HPCML_HISTORY_STORE': os.path.join(tmp, 'stores')}
        logs = os.path.join(tmp, 'training')
        lines = generate(logs, days=400)

        base = scale_row('training, 2 systems, 400 days', logs, lines,
                         lambda: next_night(logs), env, True)
        for nodes in args.nodes:
            logs = os.path.join(tmp, f'sweep{nodes}')
            lines = generate_sweeps(logs, nodes, args.sweep_days,
                                    checks=args.checks)
            row = scale_row(
                f'node sweeps, {nodes:,} nodes x {args.checks} checks, '
                f'{args.sweep_days} nights', logs, lines,
                lambda: generate_sweeps(logs, nodes, 1, checks=args.checks,
                                        first_day=args.sweep_days),
                env, lines <= args.line_by_line_max)
            print(f'  nightly report / training history\'s: '
                  f'{row[0] / base[0]:.2f}x time, peak memory '
                  f'{row[1]:.2f} GB', file=sys.stderr, flush=True)
            shutil_rm(logs)


def next_night(logs):
    '''Append to each perflog its last day's lines a day later; returns
    the lines appended.'''
    import calendar
    added = 0
    for path in pathlib.Path(logs).rglob('*.log'):
        lines = path.read_text().splitlines()
        day = lines[-1][:10]
        last = [line for line in lines[1:] if line[:10] == day]
        shifted = []
        for line in last:
            stamp, rest = line.split('|', 1)
            when = calendar.timegm(time.strptime(stamp[:19],
                                                 '%Y-%m-%dT%H:%M:%S'))
            shifted.append(time.strftime('%Y-%m-%dT%H:%M:%S+0000',
                                         time.gmtime(when + 86400))
                           + '|' + rest)
        with open(path, 'a') as fp:
            fp.write('\n'.join(shifted) + '\n')
        added += len(shifted)
    return added


def shutil_rm(path):
    import shutil
    shutil.rmtree(path, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--days', type=int, default=400)
    p.add_argument('--scale', action='store_true')
    p.add_argument('--nodes', type=int, nargs='+', default=[1000, 6000])
    p.add_argument('--checks', type=int, default=5)
    p.add_argument('--sweep-days', type=int, default=365)
    p.add_argument('--line-by-line-max', type=int, default=2_000_000)
    p.add_argument('--tmp', help='where the histories are written '
                   '(10 million lines: about 3 GB)')
    args = p.parse_args()
    if args.scale:
        scale(args)
    else:
        figures_table(args.days)


if __name__ == '__main__':
    main()
