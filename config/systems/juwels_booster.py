"""JUWELS Booster (Jülich Supercomputing Centre): a worked example of a site.

936 nodes, each 4 x NVIDIA A100 (40 GB), 2 x AMD EPYC 7402 (48 cores,
96 hardware threads), 4 x HDR200 InfiniBand. Slurm, partition ``booster``.

Site facts the checks need, all here and none in the checks:

- GPUs are requested with ``--gres=gpu:N``;
- the account comes from ``$HPCML_ACCOUNT`` (or JSC's ``$BUDGET_ACCOUNTS``);
- a node is reached over InfiniBand at its host name plus ``i``
  (``jwb0001`` -> ``jwb0001i``): ``rendezvous_address``;
- the checks run at 1, 2, 4, 8 and 16 nodes (16: CARAML's 175B GPT);
- NCCL's and Gloo's bootstrap over the InfiniBand interface ``ib0``, and
  longer InfiniBand timeouts and retries (NCCL, UCX), as JSC's own runs
  export them: jubench-megatron-lm ``benchmark/slurm/jobscript_175B.sbatch``
  (d79ae122f7a4c0a842f6cb6aed4395db2a05002a) and CARAML
  ``llm_training/llm_benchmark_nvidia_amd.yaml`` (``ibcomm``, A100/H100).

Environment: JSC's software stage with PyTorch from modules, plus the
suite's extras in a virtual environment at ``$HPCML_VENV`` when set.
"""
import os

from hpctestlib_ml.siteconfig import (batch_general, container_environment,
                                      env, job_venv,
                                      make_site_configuration,
                                      slurm_sched_options, system_dirs,
                                      with_apptainer)

_account = env('HPCML_ACCOUNT') or os.environ.get('BUDGET_ACCOUNTS')
_venv = job_venv('config/systems/juwels_booster.py')

site_configuration = make_site_configuration(
    systems=[{
        'name': 'juwels-booster',
        'descr': 'JUWELS Booster, Jülich Supercomputing Centre',
        # The login and compute nodes, and any other host: loading this file
        # means JUWELS Booster, so its job scripts can be previewed anywhere
        # with --dry-run.
        'hostnames': [r'jwlogin\d+', r'jwb\d+', r'.*'],
        # Modules are loaded by the environment's prepare_cmds, so that job
        # scripts can be generated (--dry-run) on hosts without Lmod.
        'modules_system': 'nomod',
        'sched_options': slurm_sched_options(),
        **system_dirs(),
        # JSC provides apptainer on the compute nodes without a module (to
        # members of the 'container' group); images from HPCML_CONTAINER_DIR
        # (<framework>.sif), default the suite's (make image).
        'partitions': [with_apptainer({
            'name': 'booster',
            'descr': '4 x A100 per node',
            'scheduler': 'slurm',
            'launcher': 'srun',
            'access': ['--partition=booster'] + (
                [f'--account={_account}'] if _account else []),
            'environs': ['pytorch', 'tensorflow'],
            'max_jobs': 8,
            'time_limit': '2h',
            'processor': {'num_cpus': 96, 'num_cpus_per_core': 2,
                          'num_sockets': 2, 'num_cpus_per_socket': 48},
            'devices': [{'type': 'gpu', 'model': 'A100', 'arch': 'sm_80',
                         'num_devices': 4}],
            'resources': [{'name': 'gpu',
                           'options': ['--gres=gpu:{num_gpus_per_node}']}],
            'features': ['gpu', 'cuda'],
            'env_vars': [
                # Out-of-band (bootstrap) traffic over InfiniBand.
                ['NCCL_SOCKET_IFNAME', 'ib0'],
                ['GLOO_SOCKET_IFNAME', 'ib0'],
                # Ride out transient InfiniBand faults at scale.
                ['NCCL_IB_TIMEOUT', '50'],
                ['NCCL_IB_RETRY_CNT', '10'],
                ['UCX_RC_TIMEOUT', '4s'],
            ],
            'extras': {
                'max_nodes': 936,
                # 16 nodes: CARAML's 175B GPT (TP 8 x PP 8 = 64 GPUs).
                # CSCS's Llama 3 70B layout (32 nodes) and jubench's 96
                # are one-off comparisons, not this site's regular scales:
                # -S num_nodes=32 on a 16_nodes case.
                'scales': ['1_node', '2_nodes', '4_nodes', '8_nodes', '16_nodes'],
                'rendezvous_address': '{hostname}i',
                # A100 comes with 40 or 80 GB; the Booster's have 40.
                'device_memory_gib': 40,
                # The Storage component: the GPFS scratch file system
                # training data and checkpoints live on (JSC's $SCRATCH,
                # set by `jutil env activate -p PROJECT`; the job's shell
                # expands it).
                'storage_dir': '$SCRATCH',
            },
        }, env('HPCML_CONTAINER_DIR'))],
    }],
    environments=[{
        'name': 'pytorch',
        'prepare_cmds': [
            'module load Stages/2025 GCC OpenMPI PyTorch torchvision',
        ] + ([f'source {_venv}/bin/activate'] if _venv else []),
        'features': ['torch'],
        'target_systems': ['juwels-booster'],
    }, {
        # ResNet50TF: the stage's TensorFlow (HPCML_TF_MODULES overrides
        # the module list), or the *Container check with the NGC image.
        'name': 'tensorflow',
        'prepare_cmds': [
            'module load ' + env('HPCML_TF_MODULES'),
        ] + ([f'source {_venv}/bin/activate'] if _venv else []),
        'features': ['tensorflow'],
        'target_systems': ['juwels-booster'],
    }, container_environment('juwels-booster')],
    general=batch_general(),
)
