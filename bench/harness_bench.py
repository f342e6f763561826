"""The suite's own cost, per workload, at the smoke size on this machine.

    .venv/bin/python bench/harness_bench.py [--checks MMoCLIP,BERTLarge] [--repeat 2] [--steps N]

For each check's ``1_proc``/``per_task`` smoke case, side by side:

1. ``reframe -r`` of that one case (``config/local.py``), wall time from
   process start to exit;
2. the same program with the same arguments run bare from the shell: the
   job script's command after ``task_env.sh per_task`` (no ReFrame, no
   task_env.sh, no provenance or energy sampler), with the job's
   PYTHONPATH and OMP_NUM_THREADS, under ``/usr/bin/time`` for its max RSS.

Figures: steady-state throughput under ReFrame / bare (the harness tax;
target >= 0.98), the fixed cost per case (wall time minus the timed steps:
ReFrame's part and the program's part: interpreter, imports, model build,
evaluation; target <= 5 s), where the bare program's time goes (start-up
to its timed window, the window, the window to its exit), the *import
floor* (a bare interpreter importing the program's ``__main__`` without
running it: its framework, its packages and its own modules, what no
change to the harness can cut), max RSS of
the process (target < 4 GiB) and MFU against this CPU's measured matmul
peak. With ``--repeat`` the pairs alternate their order (ReFrame first,
then bare first, ...) and medians are reported, since absolute times drift
on a shared VM; the tax's spread is the lowest and highest ratio.

The CPU peak that MFU needs is measured once per machine and cached in
``HPCML_CACHE_DIR`` (default ``var/cache``), as for a user's runs; each
ReFrame run otherwise gets its own ``HPCML_VAR_DIR``.

The checks are the training workloads of the registry
(:mod:`hpctestlib_ml.registry`): a new workload is measured here as soon
as it declares itself.
"""
import argparse
import json
import os
import pathlib
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
VENV_BIN = REPO / '.venv' / 'bin'
sys.path.insert(0, str(REPO))
from hpctestlib_ml import registry  # noqa: E402



def training_checks():
    '''Check -> (file under checks/, workload, throughput metric, the
    imports of its import floor), of every training workload the registry
    declares.'''
    return {declared.check: (f'{name}.py', name, declared.throughput_metric,
                             f'import {declared.program}.__main__')
            for name, declared in registry.registered().items()
            if declared.trains}


#: Check -> (file under checks/, workload, throughput metric, the imports
#: of its import floor).
CHECKS = training_checks()


def run_reframe(check, var, steps=None, extra_env=None):
    file = CHECKS[check][0]
    env = {**os.environ, 'HPCML_VAR_DIR': str(var),
           'HPCML_CACHE_DIR': os.environ.get('HPCML_CACHE_DIR',
                                             str(REPO / 'var' / 'cache')),
           **(extra_env or {})}
    report = var / 'report.json'
    start = time.perf_counter()
    with open(var / 'reframe.out', 'w+') as out:
        proc = subprocess.Popen(
            [VENV_BIN / 'reframe', '-C', REPO / 'config/local.py', '-c',
             REPO / 'checks' / file, '-n',
             f'^{check}%scale=1_proc%launch_mode=per_task', '-r',
             '--report-file', report,
             *(['-S', f'steps={steps}'] if steps else [])],
            env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        # (time, ReFrame's CPU s, the sampler's CPU s), once a second: the
        # harness's processes that live while the job runs.
        harness_cpu, sampler = [], None
        while True:
            sampler = sampler or sampler_pid()
            harness_cpu.append((time.time(), cpu_seconds(proc.pid),
                                cpu_seconds(sampler) if sampler else 0.0))
            try:
                proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                continue
        wall = time.perf_counter() - start
        out.seek(0)
        if proc.returncode:
            sys.exit(f'{check}: reframe failed:\n{out.read()[-3000:]}')
    report = json.loads(report.read_text())
    case, = [c for r in report['runs'] for c in r['testcases']]
    stage = pathlib.Path(case['outputdir'])
    text = '\n'.join((stage / n).read_text(errors='replace')
                     for n in ('rfm_job.out', 'rfm_job.err'))
    perf = {k.rsplit(':', 1)[-1]: v[0] for k, v in case['perfvalues'].items()}
    # ReFrame's own timings: the session (checks loaded to report written)
    # and the case's run phase (job submitted to job seen finished).
    perf['session_s'] = report['session_info']['time_elapsed']
    perf['job_s'] = case['time_run']
    return wall, stage / 'rfm_job.sh', text, perf, harness_cpu


def cpu_seconds(pid):
    '''User + system CPU seconds of one process (not its children).'''
    try:
        fields = pathlib.Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return 0.0
    fields = fields.rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def sampler_pid():
    '''The pid of the node's energy/memory sampler, None before it runs.'''
    for entry in pathlib.Path('/proc').iterdir():
        try:
            if (entry.name.isdigit() and
                    b'energy_sampler.py' in (entry / 'cmdline').read_bytes()):
                return entry.name
        except OSError:
            continue
    return None


def harness_share(samples, window):
    '''Percent of the machine's CPU capacity that ReFrame and the sampler
    used in the job's timed *window* (Unix start, stop), from *samples*
    of (time, reframe s, sampler s); None without a window.'''
    inside = [s for s in samples if window and window[0] <= s[0] <= window[1]]
    if len(inside) < 2:
        return None
    used = sum(max(0.0, b - a) for a, b in zip(inside[0][1:], inside[-1][1:]))
    return 100 * used / ((inside[-1][0] - inside[0][0]) * os.cpu_count())


def bare_command(job_script, extra_env=None):
    '''(argv, env) of the job's program without the harness.'''
    text = job_script.read_text()
    env = {**os.environ, **(extra_env or {})}
    for name, value in re.findall(r'^export (PYTHONPATH|OMP_NUM_THREADS)='
                                  r'(\S+)$', text, re.M):
        env[name] = value.replace('${PYTHONPATH:+:$PYTHONPATH}', '')
    line = next(l for l in text.splitlines() if 'task_env.sh per_task' in l)
    argv = shlex.split(line.split('task_env.sh per_task', 1)[1])
    # The local environment puts the venv first on PATH.
    argv[0] = str(VENV_BIN / argv[0]) if '/' not in argv[0] else argv[0]
    return argv, env


def run_bare(argv, env):
    '''(wall s, output, max RSS MiB, Unix start and end times).'''
    with tempfile.TemporaryDirectory() as cwd:
        start, begun = time.perf_counter(), time.time()
        proc = subprocess.run(['/usr/bin/time', '-f', 'maxrss_kb %M', *argv],
                              cwd=cwd, env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        wall, ended = time.perf_counter() - start, time.time()
    if proc.returncode:
        sys.exit(f'bare run failed: {shlex.join(argv)}\n{proc.stderr[-3000:]}')
    rss = int(re.findall(r'maxrss_kb (\d+)', proc.stderr)[-1]) / 1024
    return wall, proc.stdout + '\n' + proc.stderr, rss, (begun, ended)


def import_floor(imports, env, repeat=3):
    '''Median wall time of a bare interpreter that imports *imports* and
    leaves at once (os._exit, as the suite's programs do).'''
    code = f'{imports}\nimport os; os._exit(0)'
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([VENV_BIN / 'python', '-c', code], env=env,
                       check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def phases(metrics, begun, ended):
    '''(start-up, timed window, end) seconds of a bare run from its log's
    timed window; Nones where the log has none.'''
    window = metrics.get('timed_window')
    if not window:
        return None, None, None
    return window[0] - begun, window[1] - window[0], ended - window[1]


def steps_seconds(metrics):
    '''Total time of the timed steps in a log's metrics.'''
    per_step = (metrics.get('time_per_step_secs') or
                metrics.get('time_per_iteration_secs') or
                metrics.get('time_per_iteration_secs_avg'))
    steps = (metrics.get('steps') or metrics.get('iterations') or 0)
    return per_step * steps if per_step else 0.0


#: (check, variant) -> (argv, env) of the last bare command: a pair that
#: runs bare first takes it from the previous pair's job script.
_LAST_COMMAND = {}


def measure_pair(check, steps, extra_env, reframe_first):
    '''One ReFrame run and one bare run of the check's smoke case, in
    the order given: the figures of both.'''
    _, workload, metric, _ = CHECKS[check]
    extract = registry.get(workload).parser.extract_metrics

    def reframe():
        with tempfile.TemporaryDirectory() as var:
            wall, script, text, perf, cpu = run_reframe(
                check, pathlib.Path(var), steps, extra_env)
            return wall, bare_command(script, extra_env), text, perf, cpu

    if reframe_first:
        rf_wall, (argv, env), rf_text, perf, cpu = reframe()
        bare_wall, bare_text, rss, (begun, ended) = run_bare(argv, env)
    else:
        argv, env = _LAST_COMMAND[check, str(extra_env)]
        bare_wall, bare_text, rss, (begun, ended) = run_bare(argv, env)
        rf_wall, (argv, env), rf_text, perf, cpu = reframe()
    _LAST_COMMAND[check, str(extra_env)] = argv, env
    rf, bare = extract(rf_text), extract(bare_text)
    start_s, window_s, end_s = phases(bare, begun, ended)
    return {
        'reframe_rate': rf[metric], 'bare_rate': bare[metric],
        'ratio': rf[metric] / bare[metric],
        'reframe_wall': rf_wall, 'bare_wall': bare_wall,
        'steps_s': steps_seconds(bare), 'maxrss_mib': rss,
        'startup_s': start_s, 'window_s': window_s, 'end_s': end_s,
        'mfu': perf.get('mfu'), 'env': env,
        # ReFrame's part: start-up and exit (outside its session), and the
        # run phase beyond the bare program (job script, task_env.sh,
        # polling); the rest is setup, sanity and performance.
        'reframe_outside_session_s': rf_wall - perf['session_s'],
        'job_over_bare_s': perf['job_s'] - bare_wall,
        'harness_cpu_percent': harness_share(cpu, rf.get('timed_window')),
    }


def summarise(check, rows, extra_env=None):
    '''Medians of a check's pairs, the import floor and the derived
    fixed costs.'''
    _, _, metric, imports = CHECKS[check]
    med = lambda key: (statistics.median(r[key] for r in rows)
                       if rows[0][key] is not None else None)
    floor = import_floor(imports, rows[0]['env'])
    fixed = med('reframe_wall') - med('steps_s')
    return {
        'check': check, 'metric': metric, 'pairs': len(rows),
        'env': extra_env or {},
        'reframe_rate': med('reframe_rate'), 'bare_rate': med('bare_rate'),
        'tax_ratio': med('ratio'),
        'tax_ratio_range': [min(r['ratio'] for r in rows),
                            max(r['ratio'] for r in rows)],
        'reframe_wall_s': med('reframe_wall'), 'bare_wall_s': med('bare_wall'),
        'fixed_s': fixed,
        'fixed_reframe_s': med('reframe_wall') - med('bare_wall'),
        'reframe_outside_session_s': med('reframe_outside_session_s'),
        'job_over_bare_s': med('job_over_bare_s'),
        'fixed_program_s': med('bare_wall') - med('steps_s'),
        'import_floor_s': floor, 'fixed_above_floor_s': fixed - floor,
        'bare_startup_s': med('startup_s'), 'bare_window_s': med('window_s'),
        'bare_end_s': med('end_s'),
        'harness_cpu_percent': med('harness_cpu_percent'),
        'maxrss_mib': max(r['maxrss_mib'] for r in rows),
        'mfu_percent': med('mfu'),
        'runs': [{k: v for k, v in r.items() if k != 'env'} for r in rows],
    }


def measure(check, repeat, steps=None, before_env=None):
    '''{variant: summary}: 'after' (the tree as it is) and, with
    *before_env*, 'before' (the same with those variables set), their
    pairs interleaved and each repeat in the opposite order.'''
    variants = {'after': None}
    if before_env:
        variants = {'before': before_env, 'after': None}
    rows = {name: [] for name in variants}
    for n in range(repeat):
        order = list(variants) if n % 2 == 0 else list(variants)[::-1]
        for name in order:
            rows[name].append(measure_pair(check, steps, variants[name],
                                           reframe_first=n % 2 == 0))
    return {name: summarise(check, rows[name], variants[name])
            for name in variants}


def header(width):
    '''The figures table's header line.'''
    names = ('reframe', 'bare', 'ratio', '(range)', 'fixed s', 'rfm s',
             'prog s', 'floor s', 'start', 'steps', 'end', 'hns %',
             'RSS MiB', 'MFU %')
    widths = (9, 9, 6, 11, 7, 5, 6, 7, 5, 5, 5, 5, 7, 5)
    return ' '.join([f'{"check":<{width}}',
                     *(f'{n:>{w}}' for n, w in zip(names, widths))]) + \
        '  metric'


def row(name, r, width):
    '''One line of the figures table.'''
    show = lambda v: '-' if v is None else f'{v:.1f}'
    pct = lambda v: '-' if v is None else f'{v:.2f}'
    low, high = r['tax_ratio_range']
    return (f'{name:<{width}} {r["reframe_rate"]:>9.2f} '
            f'{r["bare_rate"]:>9.2f} {r["tax_ratio"]:>6.3f} '
            f'{f"{low:.2f}-{high:.2f}":>11} {r["fixed_s"]:>7.1f} '
            f'{r["fixed_reframe_s"]:>5.1f} {r["fixed_program_s"]:>6.1f} '
            f'{r["import_floor_s"]:>7.1f} {show(r["bare_startup_s"]):>5} '
            f'{show(r["bare_window_s"]):>5} {show(r["bare_end_s"]):>5} '
            f'{pct(r["harness_cpu_percent"]):>5} {r["maxrss_mib"]:>7.0f} {show(r["mfu_percent"]):>5}  '
            f'{r["metric"]}')


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--checks', default=','.join(CHECKS))
    p.add_argument('--repeat', type=int, default=1)
    p.add_argument('--steps', type=int, metavar='N',
                   help='-S steps=N: longer runs, steadier throughput')
    p.add_argument('--before-env', metavar='NAME=VALUE,...',
                   help='also measure a "before" variant with these '
                        'variables set (e.g. HPCML_LOG_LEVEL=debug,'
                        'HPCML_FULL_EXIT=1), interleaved with the tree as '
                        'it is')
    p.add_argument('--json', metavar='FILE', help='also write the figures')
    args = p.parse_args()
    try:
        before_env = dict(item.split('=', 1) for item in
                          args.before_env.split(',')) if args.before_env \
            else None
    except ValueError:
        p.error(f'--before-env {args.before_env!r}: give NAME=VALUE pairs '
                f'separated by commas')
    unknown = set(args.checks.split(',')) - set(CHECKS)
    if unknown:
        p.error(f'unknown check(s) {", ".join(sorted(unknown))}; choose from '
                f'{", ".join(CHECKS)}')
    results = []
    print(header(24 if before_env else 14))
    width = 24 if before_env else 14
    for check in args.checks.split(','):
        for variant, r in measure(check, args.repeat, args.steps,
                                  before_env).items():
            r['variant'] = variant
            results.append(r)
            print(row(f'{check} ({variant})' if before_env else check, r,
                      width), flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {'date': time.strftime('%Y-%m-%d %H:%M %Z'),
             'host': os.uname().nodename, 'cpus': os.cpu_count(),
             'repeat': args.repeat, 'steps': args.steps,
             'before_env': before_env, 'results': results}, indent=1))


if __name__ == '__main__':
    main()
