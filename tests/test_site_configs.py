"""The job scripts real GPU sites get, generated for real by reframe
--dry-run (setup runs, no job is submitted): one ReFrame session per
configuration writes all of its scripts, which the tests then read.

The review's site (shared/reviews/docs-review-2026-11-28.md: 4 nodes of
4 x A100-SXM4-80GB, Slurm, 128 CPUs a node, a 2 h MaxTime) through
config/slurm.py's variables.

Each session costs one reframe start and the checks' setup: about 10 s
of one core here (13 s wall), whatever the number of cases.
"""
import os
import re
import subprocess

import pytest

from conftest import BIN, REPO

pytestmark = pytest.mark.integration

#: The review's site, as config/slurm.py's variables say it.
REVIEW_SITE = {
    'HPCML_SLURM_PARTITION': 'gpu', 'HPCML_ACCOUNT': 'proj1',
    'HPCML_SCHEDULER': 'squeue', 'HPCML_GPUS_PER_NODE': '4',
    'HPCML_GPU_MODEL': 'A100', 'HPCML_DEVICE_MEMORY_GIB': '80',
    'HPCML_CPUS_PER_NODE': '128', 'HPCML_MAX_NODES': '4',
    'HPCML_SCALES': '1_node,2_nodes,4_nodes',
    'HPCML_GPU_RESOURCE': '--gres=gpu:{num_gpus_per_node}',
    'HPCML_MAX_TIME_LIMIT': '2h',
    # What the review asked where to put: all of a node's memory, a job
    # that starts clean of the submitting shell, a GPU bound to each rank.
    'HPCML_SBATCH_OPTIONS': '--mem=0 --export=NONE',
    'HPCML_RANK_BINDING': '--gpus-per-task=1',
    'HPCML_LOADER_WORKERS': '8',
}


def dry_run(tmp_path, cache_dir, config, pattern, *options, **env):
    '''reframe --dry-run of *config* for the cases *pattern* selects:
    ({case's display name without blanks: job script}, stdout).'''
    var = tmp_path / 'var'
    full_env = {**os.environ, 'HPCML_VAR_DIR': str(var),
                'HPCML_CACHE_DIR': str(cache_dir), **env}
    full_env.pop('RFM_CONFIG_FILES', None)
    report = tmp_path / 'report.json'
    proc = subprocess.run(
        [BIN / 'reframe', '-C', REPO / config, '-c', REPO / 'checks', '-n',
         pattern, *options, '--dry-run', '--report-file', report],
        env=full_env, cwd=tmp_path, capture_output=True, text=True,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    import json
    scripts = {}
    for run in json.loads(report.read_text())['runs']:
        for case in run['testcases']:
            path = os.path.join(case['stagedir'], 'rfm_job.sh')
            if os.path.exists(path):
                scripts[case['display_name'].replace(' ', '')] = \
                    open(path).read()
    return scripts, proc.stdout


@pytest.fixture(scope='module')
def review_site(tmp_path_factory, cache_dir):
    '''MMoCLIP at 2 nodes in both launch modes on the review's site.'''
    return dry_run(tmp_path_factory.mktemp('review-site'), cache_dir,
                   'config/slurm.py', '^MMoCLIP%scale=2_nodes', **REVIEW_SITE)


def sbatch(text):
    return re.findall(r'^#SBATCH (.*)$', text, re.MULTILINE)


def script(scripts, mode):
    found, = [text for name, text in scripts.items()
              if f'launch_mode={mode}' in name]
    return found


@pytest.mark.parametrize('mode', ['per_task', 'torchrun'])
def test_the_partitions_time_limit_caps_the_request(review_site, mode):
    '''Issue 40: CLIP's benchmark at 2 nodes asked for 2 h 15 min, which
    sbatch refuses on a partition whose MaxTime is 2 h; capped, with the
    size's own request said beside it.'''
    text = script(review_site[0], mode)
    assert '--time=2:0:0' in sbatch(text)
    assert ("# hpcml: time limit 2h, the partition's max_time_limit; the "
            "case asks 2h15m\n") in text


def run_line(text):
    return text.strip().splitlines()[-1]


@pytest.mark.parametrize('mode', ['per_task', 'torchrun'])
def test_whole_nodes_memory_and_a_clean_start(review_site, mode):
    '''Issue 40: --exclusive by default on a GPU partition; --mem and
    --export where the site says them (its access, HPCML_SBATCH_OPTIONS);
    with --export=NONE the job passes its own environment to its tasks
    (sbatch sets SLURM_EXPORT_ENV=NONE, which srun reads).'''
    text = script(review_site[0], mode)
    lines = sbatch(text)
    assert {'--exclusive', '--mem=0', '--export=NONE'} <= set(lines)
    body = text.splitlines()
    assert body.index('export SLURM_EXPORT_ENV=ALL') < body.index(
        run_line(text))


def test_a_gpu_bound_to_each_rank_where_a_task_is_one(review_site):
    '''extras['rank_binding'] on srun where each task is a rank; not
    under torchrun, whose one task a node forks the node's ranks.'''
    assert run_line(script(review_site[0], 'per_task')).startswith(
        'srun --cpus-per-task=32 --kill-on-bad-exit=1 --gpus-per-task=1 ')
    assert '--gpus-per-task' not in script(review_site[0], 'torchrun')


@pytest.mark.parametrize('mode', ['per_task', 'torchrun'])
def test_loader_workers_are_the_sites_at_most_the_ranks_cpus(review_site,
                                                             mode):
    '''Issue 40: CLIP ran 32 loader processes a rank (the rank's CPUs,
    as jubench-mmoclip's --workers=$threadspertask) with no way for the
    site to say fewer: extras['loader_workers'].'''
    text = script(review_site[0], mode)
    assert ' --workers 8 ' in run_line(text)
    assert 'export OMP_NUM_THREADS=32' in text
