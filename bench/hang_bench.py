"""The hang watch on healthy runs: how many raise a hang (none may), and
what the heartbeat costs a step.

    .venv/bin/python bench/hang_bench.py [--runs 50] [--bound 2]
        [--out bench/results/hang_bench_DATE.txt]

1. The cost of the rank's side: ``heartbeat.step()`` and ``beat()``
   timed over a million calls each, watched (the record mapped in a
   directory of /dev/shm, as the reaper makes it) and unwatched, against
   the shortest step of the suite's smallest cases on this CPU.
2. ``--runs`` healthy runs through the suite (``hpcml suite`` on
   config/local.py, one session, ``--repeat``): half CosmoFlow
   ``2_procs`` under torchrun (DDP, its evaluation after the steps), half
   Collectives ``2_procs`` (a step per message size, each twice the
   last), with ``HPCML_HANG_BOUND_S`` at ``--bound`` s: a floor far below
   the default 120 s, so that the bound is the cases' own ten steps, as
   on a cluster with longer steps. A run raised a hang where its case
   failed as ``hang`` or its stage left ``hpcml_hang/``.
"""
import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import timeit

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / 'src'))
import heartbeat  # noqa: E402

CASES = ('^CosmoFlow%scale=2_procs%launch_mode=torchrun$',
         '^Collectives%scale=2_procs%launch_mode=torchrun')


def call_cost(calls=1_000_000):
    '''{(function, watched): microseconds a call}.'''
    found = {}
    for watched in (False, True):
        heartbeat._state = None
        if watched:
            directory = tempfile.mkdtemp(dir='/dev/shm')
            heartbeat.start({heartbeat.BEATS_DIR: directory, 'RANK': '0'})
            assert heartbeat._state is not None
        for name in ('step', 'beat'):
            seconds = min(timeit.repeat(getattr(heartbeat, name),
                                        number=calls, repeat=3))
            found[name, watched] = seconds / calls * 1e6
    heartbeat._state = None
    return found


def healthy_runs(runs, bound, var):
    '''(cases run, [(case, result, reason)], [stage dirs with a
    hpcml_hang/], seconds) of *runs* runs.'''
    env = {**os.environ, 'HPCML_VAR_DIR': str(var),
           'HPCML_HANG_BOUND_S': str(bound)}
    env.pop('RFM_CONFIG_FILES', None)
    args = [str(REPO / '.venv' / 'bin' / 'hpcml'), 'suite', '-C',
            str(REPO / 'config' / 'local.py'), '--repeat',
            str(runs // len(CASES))]
    for case in CASES:
        args += ['-n', case]
    start = time.monotonic()
    proc = subprocess.run(args, env=env, capture_output=True, text=True,
                          cwd=var.parent)
    took = time.monotonic() - start
    results = []
    for report in sorted((var / 'reports').glob('*.json')):
        for run in json.loads(report.read_text())['runs']:
            for case in run['testcases']:
                results.append((case['display_name'], case['result'],
                                case['fail_reason'] or ''))
    hung = sorted(str(p.parent) for p in (var / 'stage').rglob('hpcml_hang'))
    if not results:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return results, hung, took


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--runs', type=int, default=50)
    p.add_argument('--bound', type=float, default=2.0)
    p.add_argument('--out', type=pathlib.Path, default=REPO / 'bench' /
                   'results' / f'hang_bench_{datetime.date.today()}.txt')
    args = p.parse_args(argv)
    lines = [f'# bench/hang_bench.py --runs {args.runs} --bound '
             f'{args.bound:g}, {datetime.datetime.now():%Y-%m-%d %H:%M}, '
             f'{os.cpu_count()} CPUs', '']
    cost = call_cost()
    lines.append('heartbeat call cost (us per call, best of 3 x 1e6):')
    for (name, watched), us in sorted(cost.items()):
        lines.append(f'  {name}() {"watched" if watched else "unwatched"}: '
                     f'{us:.3f}')
    with tempfile.TemporaryDirectory(prefix='hang-bench.') as tmp:
        var = pathlib.Path(tmp) / 'var'
        results, hung, took = healthy_runs(args.runs, args.bound, var)
    hangs = [r for r in results if r[2].startswith('hang') or
             'hang:' in r[2]]
    failed = [r for r in results if r[1] != 'pass']
    lines += ['', f'{len(results)} healthy runs in {took:.0f} s '
              f'(HPCML_HANG_BOUND_S={args.bound:g}): {len(hangs)} raised a '
              f'hang, {len(hung)} left hpcml_hang/, {len(failed)} failed']
    for name in sorted({r[0] for r in results}):
        mine = [r for r in results if r[0] == name]
        lines.append(f'  {name}: {len(mine)} runs, '
                     f'{sum(r[1] == "pass" for r in mine)} passed')
    for name, result, reason in failed:
        lines.append(f'  FAILED {name}: {reason}')
    text = '\n'.join(lines) + '\n'
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text, end='')
    return 1 if hangs or hung else 0


if __name__ == '__main__':
    sys.exit(main())
