"""LUMI-G (LUMI consortium, CSC, Kajaani): an AMD MI250X system with ROCm,
whose PyTorch runs in Singularity containers.

Written from LUMI's public documentation; never run there (the tests
generate its job scripts with ``reframe --dry-run``:
tests/test_site_configs.py, tests/data/golden/lumi_g_*.sh). Sources, read
2026-11-28:

- The nodes: https://docs.lumi-supercomputer.eu/hardware/lumig/ -- 2978
  nodes of 4 MI250X and one 64-core EPYC 7A53; an MI250X is two GCDs of
  64 GB each, and "GCDs are GPUs for Slurm and the HIP runtime": 8 a
  node; 512 GiB of memory.
- Partitions: https://docs.lumi-supercomputer.eu/runjobs/scheduled-jobs/partitions/
  -- ``standard-g`` allocated by node, 2 days at most, 1024 nodes a
  job.
- Binding: https://docs.lumi-supercomputer.eu/runjobs/scheduled-jobs/distribution-binding/
  -- low-noise mode leaves 56 cores to jobs (the first of each of the 8
  L3 regions is the system's), NUMA domains are not numbered as the
  GCDs, and an application that takes its GPU by its local rank is
  bound with ``--cpu-bind=mask_cpu:...`` so that rank *r*'s 7 cores
  are those nearest GCD *r*.
- PyTorch: LUMI AI Guide, https://github.com/Lumi-supercomputer/LUMI-AI-Guide
  (``05-multi-gpu-and-node``: ``--gpus-per-node=8``, 8 tasks of 7 CPUs
  or one of 56, ``--mem=480G`` for a node, the CPU masks above;
  ``02-setting-up-environment``: PyTorch in the LUMI AI Factory's
  Singularity images, with the ``lumi-aif-singularity-bindings`` module
  for Slingshot and the file systems, no ``--rocm``: the images bring
  their own ROCm).
- Containers: https://docs.lumi-supercomputer.eu/runjobs/scheduled-jobs/container-jobs/
  -- the ``singularity`` runtime of the OS (SingularityCE, no
  ``apptainer`` command), no module needed; project paths are symlinks,
  so bind their full paths (the suite binds the checkout and stage at
  their own paths: keep them under the paths the bindings module
  mounts).

The suite runs here in containers only: ``HPCML_CONTAINER_IMAGE`` names a
ROCm SIF with the suite's packages (a LUMI AI Factory
``lumi-multitorch`` image extended with the pins of ``pyproject.toml``'s
``pytorch`` extra but torch itself, as the AI Guide extends one, or
``singularity build``); without it the configuration does not load (the
suite's own image is a CUDA one). The account (``project_<id>``) comes
from ``HPCML_ACCOUNT``.
"""
from hpctestlib_ml.siteconfig import (batch_general, container_environment,
                                      env,
                                      make_site_configuration, site_images,
                                      slurm_sched_options, system_dirs,
                                      with_container_platform)

_account = env('HPCML_ACCOUNT')
_images = site_images('config/systems/lumi_g.py', 'a ROCm SIF', '.sif')

#: Rank r's 7 cores, nearest GCD r (LUMI AI Guide, run_ddp_srun_4.sh).
_CPU_MASKS = ','.join(['0x00fe000000000000', '0xfe00000000000000',
                       '0x0000000000fe0000', '0x00000000fe000000',
                       '0x00000000000000fe', '0x000000000000fe00',
                       '0x000000fe00000000', '0x0000fe0000000000'])

site_configuration = make_site_configuration(
    systems=[{
        'name': 'lumi',
        'descr': 'LUMI-G: 4 x AMD MI250X (8 GCDs) a node',
        # Login (uan) and compute nodes, and any host: loading this file
        # means LUMI, so its job scripts can be previewed anywhere.
        'hostnames': [r'uan\d+', r'nid\d+', r'.*'],
        'modules_system': 'nomod',
        'sched_options': slurm_sched_options(),
        **system_dirs(),
        'partitions': [with_container_platform({
            'name': 'standard-g',
            'descr': '8 x MI250X GCD (64 GB) and 56 cores a node',
            'scheduler': 'slurm',
            'launcher': 'srun',
            'access': ['--partition=standard-g', '--mem=480G'] + (
                [f'--account={_account}'] if _account else []),
            'environs': [],
            'max_jobs': 8,
            'processor': {'num_cpus': 56},
            'devices': [{'type': 'gpu', 'model': 'MI250X-GCD',
                         'arch': 'gfx90a', 'num_devices': 8}],
            'resources': [{'name': 'gpu',
                           'options': ['--gpus-per-node={num_gpus_per_node}']}],
            'features': ['gpu', 'rocm'],
            'extras': {
                'max_nodes': 1024,
                'scales': ['1_node', '2_nodes', '4_nodes', '8_nodes',
                           '16_nodes'],
                'max_time_limit': '2d',
                'rank_binding': [f'--cpu-bind=mask_cpu:{_CPU_MASKS}'],
                # LUMI's images bring their own ROCm: no --rocm.
                'container_gpu_options': [],
                'storage_dir': '/scratch/$SLURM_JOB_ACCOUNT',
            },
        }, 'Singularity', _images)],
    }],
    environments=[{
        **container_environment('lumi'),
        # Slingshot for RCCL and the file systems inside the images.
        'prepare_cmds': ['module use /appl/local/laifs/modules',
                         'module load lumi-aif-singularity-bindings'],
    }],
    general=batch_general(),
)
