"""How long ``hpcml report`` takes on a large history.

    .venv/bin/python bench/report_bench.py [--days 400]

Generates perflogs of two systems x three workloads x four scales, one run
per case per day (``--days 400``: 9,630 lines with failures, two header
generations and dry-run lines; tests/perflog_history.py), then times the
report as a user runs it: reading, tables, score against a baseline, a
comparison, and with ``--out`` the figures and the HTML page.
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
from perflog_history import generate  # noqa: E402


def timed(args, env):
    start = time.perf_counter()
    proc = subprocess.run([str(REPO / '.venv/bin/hpcml'), 'report', *args],
                          env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(proc.stderr)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--days', type=int, default=400)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines = generate(os.path.join(tmp, 'perflogs'), days=args.days)
        env = {**os.environ, 'HPCML_VAR_DIR': tmp}
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
              f'(process start included):')
        for name, report_args in figures:
            print(f'  {name:<40} {timed(report_args, env):6.2f} s')


if __name__ == '__main__':
    main()
