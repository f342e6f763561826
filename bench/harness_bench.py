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
evaluation; target <= 5 s), max RSS of the process (target < 4 GiB) and MFU
against this CPU's measured matmul peak. With ``--repeat`` the cases
alternate (ReFrame, bare, ReFrame, bare, ...) and medians are reported,
since absolute times drift on a shared VM.
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
from hpctestlib_ml.parsers import EXTRACTORS  # noqa: E402

#: Check -> (file under checks/, workload, throughput metric, steps metric).
CHECKS = {
    'MMoCLIP': ('clip.py', 'clip', 'throughput_avg'),
    'MegatronGPT': ('megatron.py', 'megatron', 'tokens_per_second'),
    'GPT2FineTune': ('gpt2_finetune.py', 'gpt2_finetune',
                     'samples_per_second'),
    'BERTLarge': ('bert.py', 'bert', 'samples_per_second'),
    'CosmoFlow': ('cosmoflow.py', 'cosmoflow', 'samples_per_second'),
    'DeepLabV3Plus': ('deepcam.py', 'deeplabv3plus', 'samples_per_second'),
    'AlphaFold2': ('alphafold2.py', 'alphafold2', 'samples_per_second'),
    'ResNet50TF': ('resnet50.py', 'resnet50', 'images_per_second'),
}


def run_reframe(check, var, steps=None):
    file, _, _ = CHECKS[check]
    env = {**os.environ, 'HPCML_VAR_DIR': str(var)}
    report = var / 'report.json'
    start = time.perf_counter()
    proc = subprocess.run(
        [VENV_BIN / 'reframe', '-C', REPO / 'config/local.py', '-c',
         REPO / 'checks' / file, '-n',
         f'^{check}%scale=1_proc%launch_mode=per_task', '-r',
         '--report-file', report, *(['-S', f'steps={steps}'] if steps else [])],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f'{check}: reframe failed:\n{proc.stdout[-3000:]}')
    case, = [c for r in json.loads(report.read_text())['runs']
             for c in r['testcases']]
    stage = pathlib.Path(case['outputdir'])
    text = '\n'.join((stage / n).read_text(errors='replace')
                     for n in ('rfm_job.out', 'rfm_job.err'))
    perf = {k.rsplit(':', 1)[-1]: v[0] for k, v in case['perfvalues'].items()}
    return wall, stage / 'rfm_job.sh', text, perf


def bare_command(job_script):
    '''(argv, env) of the job's program without the harness.'''
    text = job_script.read_text()
    env = {**os.environ}
    for name, value in re.findall(r'^export (PYTHONPATH|OMP_NUM_THREADS)='
                                  r'(\S+)$', text, re.M):
        env[name] = value.replace('${PYTHONPATH:+:$PYTHONPATH}', '')
    line = next(l for l in text.splitlines() if 'task_env.sh per_task' in l)
    argv = shlex.split(line.split('task_env.sh per_task', 1)[1])
    # The local environment puts the venv first on PATH.
    argv[0] = str(VENV_BIN / argv[0]) if '/' not in argv[0] else argv[0]
    return argv, env


def run_bare(argv, env):
    with tempfile.TemporaryDirectory() as cwd:
        start = time.perf_counter()
        proc = subprocess.run(['/usr/bin/time', '-f', 'maxrss_kb %M', *argv],
                              cwd=cwd, env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f'bare run failed: {shlex.join(argv)}\n{proc.stderr[-3000:]}')
    rss = int(re.findall(r'maxrss_kb (\d+)', proc.stderr)[-1]) / 1024
    return wall, proc.stdout + '\n' + proc.stderr, rss


def steps_seconds(metrics):
    '''Total time of the timed steps in a log's metrics.'''
    per_step = (metrics.get('time_per_step_secs') or
                metrics.get('time_per_iteration_secs') or
                metrics.get('time_per_iteration_secs_avg'))
    steps = (metrics.get('steps') or metrics.get('iterations') or 0)
    return per_step * steps if per_step else 0.0


def measure(check, repeat, steps=None):
    _, workload, metric = CHECKS[check]
    extract = EXTRACTORS[workload]
    rows = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as var:
            rf_wall, script, rf_text, perf = run_reframe(
                check, pathlib.Path(var), steps)
            argv, env = bare_command(script)
        bare_wall, bare_text, rss = run_bare(argv, env)
        rf, bare = extract(rf_text), extract(bare_text)
        rows.append({
            'reframe_rate': rf[metric], 'bare_rate': bare[metric],
            'reframe_wall': rf_wall, 'bare_wall': bare_wall,
            'steps_s': steps_seconds(bare), 'maxrss_mib': rss,
            'mfu': perf.get('mfu'), 'unit': metric,
        })
    med = lambda key: statistics.median(r[key] for r in rows)
    return {
        'check': check, 'metric': metric,
        'reframe_rate': med('reframe_rate'), 'bare_rate': med('bare_rate'),
        'tax_ratio': statistics.median(r['reframe_rate'] / r['bare_rate']
                                       for r in rows),
        'reframe_wall_s': med('reframe_wall'), 'bare_wall_s': med('bare_wall'),
        'fixed_s': med('reframe_wall') - med('steps_s'),
        'fixed_reframe_s': med('reframe_wall') - med('bare_wall'),
        'fixed_program_s': med('bare_wall') - med('steps_s'),
        'maxrss_mib': max(r['maxrss_mib'] for r in rows),
        'mfu_percent': med('mfu') if rows[0]['mfu'] is not None else None,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--checks', default=','.join(CHECKS))
    p.add_argument('--repeat', type=int, default=1)
    p.add_argument('--steps', type=int, metavar='N',
                   help='-S steps=N: longer runs, steadier throughput')
    p.add_argument('--json', metavar='FILE', help='also write the figures')
    args = p.parse_args()
    results = []
    print(f'{"check":<14} {"reframe":>10} {"bare":>10} {"ratio":>6} '
          f'{"fixed s":>8} {"rfm s":>6} {"prog s":>7} {"RSS MiB":>8} '
          f'{"MFU %":>6}  metric')
    for check in args.checks.split(','):
        r = measure(check, args.repeat, args.steps)
        results.append(r)
        mfu = f'{r["mfu_percent"]:.1f}' if r['mfu_percent'] else '-'
        print(f'{check:<14} {r["reframe_rate"]:>10.2f} {r["bare_rate"]:>10.2f} '
              f'{r["tax_ratio"]:>6.3f} {r["fixed_s"]:>8.1f} '
              f'{r["fixed_reframe_s"]:>6.1f} {r["fixed_program_s"]:>7.1f} '
              f'{r["maxrss_mib"]:>8.0f} {mfu:>6}  {r["metric"]}', flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {'date': time.strftime('%Y-%m-%d %H:%M %Z'),
             'host': os.uname().nodename, 'cpus': os.cpu_count(),
             'results': results}, indent=1))


if __name__ == '__main__':
    main()
