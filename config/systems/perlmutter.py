"""NERSC Perlmutter: an NVIDIA A100 system, PyTorch from NERSC's module,
and podman-hpc for the ``*Container`` checks.

Written from NERSC's public documentation; never run there (the tests
generate its job scripts with ``reframe --dry-run``:
tests/test_site_configs.py, tests/data/golden/perlmutter_*.sh). Sources,
read 2026-11-28:

- The nodes: https://docs.nersc.gov/systems/perlmutter/architecture/ --
  1536 GPU nodes of one AMD EPYC 7763 (64 cores, 2 hardware threads
  each) and 4 x A100 of 40 GB, and 256 of 4 x A100 of 80 GB; 256 GB of
  memory; 4 Slingshot 11 NICs.
- Jobs: https://docs.nersc.gov/jobs/ and https://docs.nersc.gov/jobs/policy/
  -- GPU nodes are asked for with the constraint ``gpu`` (the 80 GB ones
  with ``gpu&hbm80g``); the ``debug`` QOS is the default, production
  runs ask for ``regular`` (48 hours at most); the account with ``-A``.
  Slurm counts a GPU node's 128 hardware threads: 32 to each of 4
  tasks, as NERSC's GPU examples give (``-c 32``).
- PyTorch: https://docs.nersc.gov/machinelearning/pytorch/ -- NERSC's
  ``pytorch`` module; the suite's own packages in a virtual environment
  beside it (``HPCML_VENV``, made with ``--system-site-packages``).
- Containers: NERSC/podman-hpc (https://github.com/NERSC/podman-hpc),
  ``podman-hpc run --gpu``; its ``nccl`` module's settings for NCCL over
  Slingshot (``etc/modules.d/nccl.yaml``: ``NCCL_SOCKET_IFNAME=hsn``,
  ``NCCL_CROSS_NIC=1``, ``FI_CXI_DISABLE_HOST_REGISTER=1``), which the
  partition exports to every job.

Two partitions, one per GPU memory: ``gpu`` (40 GB, ``-C gpu``) and
``gpu80`` (80 GB, ``-C gpu&hbm80g``): an A100 comes in both sizes, and
the memory check needs to know which. The ``*Container`` checks run where
``HPCML_CONTAINER_IMAGE`` names the image (``podman-hpc pull`` or a
``podman-hpc migrate``\\ d build of the suite's ``make image``); the
account comes from ``HPCML_ACCOUNT``.
"""
from hpctestlib_ml.siteconfig import (batch_general, container_environment,
                                      env, job_venv,
                                      make_site_configuration, one_image,
                                      slurm_sched_options, system_dirs,
                                      with_container_platform)

_account = env('HPCML_ACCOUNT')
_venv = job_venv('config/systems/perlmutter.py')
_image = env('HPCML_CONTAINER_IMAGE')


def _partition(name, constraint, memory_gib):
    '''A partition of Perlmutter's GPU nodes of *memory_gib* GiB GPUs.'''
    part = {
        'name': name,
        'descr': f'4 x A100 ({memory_gib} GB) and 64 cores a node',
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': [f'--constraint={constraint}', '--qos=regular'] + (
            [f'--account={_account}'] if _account else []),
        'environs': ['pytorch'],
        'max_jobs': 8,
        'processor': {'num_cpus': 128, 'num_cpus_per_core': 2,
                      'num_sockets': 1, 'num_cpus_per_socket': 128},
        'devices': [{'type': 'gpu', 'model': 'A100', 'arch': 'sm_80',
                     'num_devices': 4}],
        'resources': [{'name': 'gpu',
                       'options': ['--gpus-per-node={num_gpus_per_node}']}],
        'features': ['gpu', 'cuda'],
        'env_vars': [
            ['NCCL_SOCKET_IFNAME', 'hsn'],
            ['NCCL_CROSS_NIC', '1'],
            ['FI_CXI_DISABLE_HOST_REGISTER', '1'],
        ],
        'extras': {
            'max_nodes': 1536 if memory_gib == 40 else 256,
            'scales': ['1_node', '2_nodes', '4_nodes', '8_nodes',
                       '16_nodes'],
            'max_time_limit': '48h',
            'device_memory_gib': memory_gib,
            # Each rank's cores its own, where a task is one rank (NERSC's
            # examples export SLURM_CPU_BIND=cores); the GPUs all seen,
            # each rank taking its local rank's.
            'rank_binding': ['--cpu-bind=cores'],
            'storage_dir': '$PSCRATCH',
        },
    }
    if _image:
        part = with_container_platform(part, 'PodmanHPC', one_image(_image))
    return part


site_configuration = make_site_configuration(
    systems=[{
        'name': 'perlmutter',
        'descr': 'NERSC Perlmutter: 4 x NVIDIA A100 a GPU node',
        # Login and compute nodes, and any host: loading this file means
        # Perlmutter, so its job scripts can be previewed anywhere.
        'hostnames': [r'login\d+', r'nid\d+', r'.*'],
        'modules_system': 'nomod',
        'sched_options': slurm_sched_options(),
        **system_dirs(),
        'partitions': [_partition('gpu', 'gpu', 40),
                       _partition('gpu80', 'gpu&hbm80g', 80)],
    }],
    environments=[{
        'name': 'pytorch',
        'prepare_cmds': ['module load pytorch'] + (
            [f'source {_venv}/bin/activate'] if _venv else []),
        'features': ['torch'],
        'target_systems': ['perlmutter'],
    }, container_environment('perlmutter')],
    general=batch_general(),
)
