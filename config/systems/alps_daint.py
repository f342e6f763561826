"""CSCS Alps, Daint (Swiss National Supercomputing Centre): an NVIDIA GH200
system whose PyTorch runs in CSCS's Container Engine.

Written from CSCS's public documentation; never run there (the tests
generate its job scripts with ``reframe --dry-run``:
tests/test_site_configs.py, tests/data/golden/alps_daint_*.sh). Sources,
read 2026-11-28:

- Daint: https://docs.cscs.ch/clusters/daint/ -- about 1,022 GH200
  nodes; partition ``normal`` for production, time limit 24 hours, its
  nodes not shared; login nodes ``daint-ln00[1-4]``.
- The GH200 nodes under Slurm: https://docs.cscs.ch/running/slurm/ --
  four GPUs a node; one rank per GPU with ``--ntasks-per-node=4`` and
  ``--gpus-per-task=1`` ("equivalent to setting CUDA_VISIBLE_DEVICES to
  SLURM_LOCALID"); 72 Grace cores a GH200 module, 288 a node, one
  hardware thread each (its affinity example: ``-c72`` gives rank *r*
  cores ``72r``-``72r+71``); ``--exclusive --mem=450G`` for a whole
  node ("there are 4 Grace CPUs with ~120 GB of memory on the node";
  ``--mem=0`` is refused on Clariden's GH200 nodes).
- PyTorch: https://docs.cscs.ch/software/ml/pytorch/ -- the Container
  Engine recommended; the EDF annotations
  ``com.hooks.aws_ofi_nccl.enabled = "true"`` and
  ``com.hooks.aws_ofi_nccl.variant = "cuda12"`` (NCCL over Slingshot),
  and the environment it sets (``CUDA_CACHE_DISABLE=1``,
  ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1``, ``MPICH_GPU_SUPPORT_ENABLED=0``).
- Images: https://docs.cscs.ch/build-install/containers/ -- built with
  Podman and imported with enroot into a squashfs file the EDF names.
- GPU memory: 96 GB (NVIDIA's GH200 data sheet: 96 GB HBM3, or 144 GB
  HBM3e on the later superchip). CSCS's NCCL page shows the devices as
  ``NVIDIA GH200 120GB``, the LPDDR5X size of the HBM3 superchip (its
  Slurm guide: ~120 GB a Grace). Not measured here.
- How CSCS writes its own ReFrame configuration for Daint, which this
  follows for the partition's name, ``sm_90`` and the GPU request:
  eth-cscs/cscs-reframe-tests ``config/systems/daint.py``.

The suite runs here in containers only: ``HPCML_CONTAINER_IMAGE`` names
the squashfs image (the suite's own, ``make image`` then ``enroot import
podman://localhost/hpcml:<tag>``, or one built on NGC's PyTorch image
with ``make image ARGS='--base nvcr.io/nvidia/pytorch:25.06-py3'``);
without it the configuration does not load. The account comes from
``HPCML_ACCOUNT``.
"""
from hpctestlib_ml.siteconfig import (batch_general, container_environment,
                                      env,
                                      make_site_configuration, site_images,
                                      slurm_sched_options, system_dirs,
                                      with_container_platform)

_account = env('HPCML_ACCOUNT')
_images = site_images('config/systems/alps_daint.py',
                      'the squashfs file of an image (enroot import)')

site_configuration = make_site_configuration(
    systems=[{
        'name': 'alps-daint',
        'descr': 'Alps Daint, CSCS: 4 x NVIDIA GH200 a node',
        # The login and compute nodes, and any host: loading this file
        # means Daint, so its job scripts can be previewed anywhere.
        'hostnames': [r'daint-ln\d+', r'nid\d+', r'.*'],
        'modules_system': 'nomod',
        'sched_options': slurm_sched_options(),
        **system_dirs(),
        'partitions': [with_container_platform({
            'name': 'normal',
            'descr': '4 x GH200 (96 GB HBM3) and 4 x 72 Grace cores a node',
            'scheduler': 'slurm',
            'launcher': 'srun',
            # All of a node's memory that Slurm grants here (--mem=0 is
            # refused on CSCS's GH200 clusters).
            'access': ['--partition=normal', '--mem=450G'] + (
                [f'--account={_account}'] if _account else []),
            'environs': [],
            'max_jobs': 8,
            'processor': {'num_cpus': 288, 'num_cpus_per_core': 1,
                          'num_sockets': 4, 'num_cpus_per_socket': 72},
            'devices': [{'type': 'gpu', 'model': 'GH200', 'arch': 'sm_90',
                         'num_devices': 4}],
            'resources': [{'name': 'gpu',
                           'options': ['--gpus-per-node={num_gpus_per_node}']}],
            'features': ['gpu', 'cuda'],
            'env_vars': [
                ['CUDA_CACHE_DISABLE', '1'],
                ['TORCH_NCCL_ASYNC_ERROR_HANDLING', '1'],
                ['MPICH_GPU_SUPPORT_ENABLED', '0'],
            ],
            'extras': {
                'max_nodes': 1022,
                'scales': ['1_node', '2_nodes', '4_nodes', '8_nodes',
                           '16_nodes'],
                'max_time_limit': '24h',
                'device_memory_gib': 96,
                # One GPU to each rank where a task is one.
                'rank_binding': ['--gpus-per-task=1'],
                'storage_dir': '$SCRATCH',
                'container_annotations': {
                    'com.hooks.aws_ofi_nccl.enabled': 'true',
                    'com.hooks.aws_ofi_nccl.variant': 'cuda12',
                },
            },
        }, 'ContainerEngine', _images)],
    }],
    environments=[container_environment('alps-daint')],
    general=batch_general(),
)
