"""The job scripts real GPU sites get, generated for real by reframe
--dry-run (setup runs, no job is submitted): one ReFrame session per
configuration writes all of its scripts, which the tests then read.

- Three real centres, each written from its public documentation and
  never run there (config/systems/: alps_daint.py, lumi_g.py,
  perlmutter.py), their MMoCLIP scripts at 2 nodes held against golden
  files (tests/data/golden/, a change is a reviewed diff: tests/golden.py);
- the review's site (shared/reviews/docs-review-2026-11-28.md: 4 nodes of
  4 x A100-SXM4-80GB, Slurm, 128 CPUs a node, a 2 h MaxTime) through
  config/slurm.py's variables.

Each session costs one reframe start and the checks' setup: about 10 s
of one core here (10-20 s wall), whatever the number of cases; the
module, four sessions, about 60 s.
"""
import os
import re
import subprocess

import pytest

from conftest import BIN, REPO
from golden import check_golden, normalized

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
    ({case's display name without blanks: job script, normalized as the
    golden files are}, stdout).'''
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
                    normalized(open(path).read(), var)
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


# Real centres

#: What the tests give the real sites' configurations: an account, and
#: the image the sites that run in containers only must name.
SITE_ENV = {'HPCML_ACCOUNT': 'proj1'}
IMAGES = {
    'alps_daint': '/capstor/scratch/cscs/me/ce-images/hpcml.sqsh',
    'lumi_g': '/scratch/project_465000000/hpcml/hpcml-rocm.sif',
    'perlmutter': 'registry.nersc.gov/m0000/hpcml:1',
}
#: Each site's session: the cases, and the golden file of each case as
#: (check, launch mode).
SITES = {
    'alps_daint': ('^MMoCLIPContainer%scale=2_nodes', ()),
    'lumi_g': ('^MMoCLIPContainer%scale=2_nodes', ()),
    'perlmutter': ('^MMoCLIP(Container)?%scale=2_nodes',
                   ('--system', 'perlmutter:gpu')),
}


@pytest.fixture(scope='module')
def site_scripts(tmp_path_factory, cache_dir):
    '''{site: ({case: normalized job script}, stdout)}, one reframe
    session each: 11-50 s for the three here (2 cores shared with other
    work), borne by the first test that asks. Over 30 s because each real site is a
    ReFrame session of its own (a configuration is one file, loaded once
    a session); each writes all of its cases' scripts at once, and every
    test of the sites reads them.'''
    return {site: dry_run(tmp_path_factory.mktemp(site), cache_dir,
                          f'config/systems/{site}.py', pattern, *options,
                          **SITE_ENV, HPCML_CONTAINER_IMAGE=IMAGES[site])
            for site, (pattern, options) in SITES.items()}


def golden_name(site, case):
    check = 'mmoclip_container' if 'Container' in case else 'mmoclip'
    mode = case.split('launch_mode=')[1].split('%')[0]
    return f'{site}_{check}_2nodes_{mode}.sh'


@pytest.mark.parametrize('site', list(SITES))
def test_real_sites_job_scripts_are_golden(site_scripts, site):
    scripts, _ = site_scripts[site]
    assert scripts, site
    for case, text in scripts.items():
        check_golden(golden_name(site, case), text)


def site_script(site_scripts, site, mode, container=True):
    scripts, _ = site_scripts[site]
    found, = [text for case, text in scripts.items()
              if f'launch_mode={mode}' in case and
              ('Container' in case) == container]
    return found


def test_alps_runs_the_container_engine_with_a_gpu_a_rank(site_scripts):
    '''CSCS: a GPU to each rank (--gpus-per-task=1), the EDF's NCCL hook
    for Slingshot, 72 Grace cores a rank, the node's memory as CSCS
    grants it, its 24 h limit above CLIP's 2 h 15 min.'''
    text = site_script(site_scripts, 'alps_daint', 'per_task')
    assert {'--ntasks-per-node=4', '--cpus-per-task=72', '--exclusive',
            '--mem=450G', '--gpus-per-node=4', '--partition=normal',
            '--account=proj1', '--time=2:15:0'} <= set(sbatch(text))
    assert run_line(text).startswith(
        'srun --cpus-per-task=72 --kill-on-bad-exit=1 --gpus-per-task=1 '
        '--environment=')
    assert 'com.hooks.aws_ofi_nccl.enabled = "true"' in text
    assert f'image = "{IMAGES["alps_daint"]}"' in text
    torchrun = site_script(site_scripts, 'alps_daint', 'torchrun')
    assert '--gpus-per-task' not in torchrun


def test_lumi_binds_each_rank_beside_its_gcd(site_scripts):
    '''LUMI: 8 GCDs a node, 7 cores a rank by LUMI's masks, Singularity
    without --rocm (its images bring ROCm), the bindings module.'''
    text = site_script(site_scripts, 'lumi_g', 'per_task')
    assert {'--ntasks-per-node=8', '--cpus-per-task=7', '--gpus-per-node=8',
            '--partition=standard-g', '--mem=480G'} <= set(sbatch(text))
    assert 'module load lumi-aif-singularity-bindings' in text
    line = run_line(text)
    assert line.startswith('srun --cpus-per-task=7 --kill-on-bad-exit=1 '
                           '--cpu-bind=mask_cpu:0x00fe000000000000,')
    assert ' singularity exec ' in line and '--rocm' not in line
    assert 'export OMP_NUM_THREADS=7' in text
    assert ' --workers 7 ' in line


def test_perlmutter_runs_nersc_pytorch_and_podman_hpc(site_scripts):
    '''NERSC: -C gpu on the regular QOS, 32 of 128 hardware threads a
    rank, NERSC's NCCL settings for Slingshot, its pytorch module for
    the bare cases and podman-hpc --gpu for the container's.'''
    text = site_script(site_scripts, 'perlmutter', 'per_task',
                       container=False)
    assert {'--constraint=gpu', '--qos=regular', '--cpus-per-task=32',
            '--gpus-per-node=4', '--exclusive'} <= set(sbatch(text))
    assert 'module load pytorch' in text
    assert 'export NCCL_SOCKET_IFNAME=hsn' in text
    assert run_line(text).startswith(
        'srun --cpus-per-task=32 --kill-on-bad-exit=1 --cpu-bind=cores ')
    container = site_script(site_scripts, 'perlmutter', 'torchrun')
    assert ' podman-hpc run ' in run_line(container)
    assert ' --gpu registry.nersc.gov/m0000/hpcml:1 ' in run_line(container)
    assert 'module load pytorch' not in container
