"""A generic Slurm cluster, described by a few environment variables.

    HPCML_SLURM_PARTITION     partition to submit to (sbatch --partition)
    HPCML_ACCOUNT             account to charge (sbatch --account)
    HPCML_SCHEDULER           ReFrame scheduler: slurm (default; needs
                              sacct) or squeue (no accounting needed)
    HPCML_GPUS_PER_NODE       GPUs per node; 0 or unset: a CPU partition
    HPCML_GPU_MODEL           GPU model: a key of the GPU model table
                              (docs: Settings, GPU models; an unknown one
                              is refused naming the nearest keys)
    HPCML_DEVICE_MEMORY_GIB   GiB of one GPU's memory; default: the
                              model's where it has one size (A100, V100
                              and GH200 come in two: a GPU partition of
                              them fails to load without it)
    HPCML_GPU_RESOURCE        how to ask for GPUs; default
                              '--gpus-per-node={num_gpus_per_node}'
                              ('--gres=gpu:{num_gpus_per_node}' elsewhere)
    HPCML_CPUS_PER_NODE       CPUs Slurm gives one node (sets --cpus-per-task);
                              default: sinfo's count for the partition (a GPU
                              partition without either fails to load)
    HPCML_MAX_NODES           most nodes one test may use (default 2)
    HPCML_MAX_TIME_LIMIT      the partition's MaxTime, e.g. '2h' or
                              '24:00:00': no case asks for more
    HPCML_EXCLUSIVE           whole nodes per job (--exclusive); default:
                              true with GPUs
    HPCML_RANK_BINDING        srun options binding each rank where a task
                              is one rank, e.g. '--gpus-per-task=1'
    HPCML_SBATCH_OPTIONS      sbatch options of every job, e.g.
                              '--mem=0 --export=NONE' (shell words)
    HPCML_LOADER_WORKERS      data-loader workers per rank (default: the
                              rank's CPUs, never more)
    HPCML_SCALES              scales to run, e.g. '1_node,2_nodes' (default:
                              all that fit)
    HPCML_RENDEZVOUS_ADDRESS  how ranks reach the first node: '{hostname}'
                              (default), a template such as '{hostname}-ib',
                              or 'nodeaddr' (the node's Slurm NodeAddr)
    HPCML_MODULES             modules to load in jobs, e.g. 'PyTorch/2.5'
    HPCML_ENV                 variables every job of the partition exports,
                              e.g. 'NCCL_SOCKET_IFNAME=ib0
                              GLOO_SOCKET_IFNAME=ib0' (shell words)
    HPCML_VENV                virtual environment to activate in jobs
                              (default: the one running ReFrame)
    HPCML_CPU_PEAK_FLOPS      a node's fp32 peak FLOP/s, for MFU on CPUs
    HPCML_CONTAINER_PLATFORM  the *Container checks' platform: Apptainer,
                              Podman, PodmanHPC, Pyxis, ContainerEngine,
                              Sarus or Singularity
                              (hpctestlib_ml/container_launch.py);
                              default Apptainer where HPCML_CONTAINER_DIR
                              or HPCML_APPTAINER_MODULES is set or
                              apptainer is on PATH, else none
    HPCML_CONTAINER_IMAGE     the image, for both frameworks (a Podman
                              reference, a SIF or squashfs path, an enroot
                              URI); default: the suite's (make image) for
                              Podman and Apptainer
    HPCML_CONTAINER_DIR       Apptainer: directory of the built images
                              (<framework>.sif)
    HPCML_CONTAINER_MODULES   modules that provide the container runtime
                              in jobs (HPCML_APPTAINER_MODULES: the same)
    HPCML_STORAGE_DIR         where the Storage component reads and writes
                              (extras['storage_dir']): the parallel file
                              system's scratch (e.g. '$SCRATCH', expanded
                              by the job) or a node-local disk
                              ('/tmp'); default: the stage directory
    HPCML_REFERENCE_NOISE_PCT how far, in percent, the partition's figures
                              move from night to night with nothing
                              changed (extras['reference_noise_pct']): no
                              threshold of hpcml references is narrower;
                              default: none (3 %)

``reframe -C config/slurm.py -c checks -r`` then runs the suite there.
Each variable is declared, with its type and allowed values, in
``hpctestlib_ml/settings.py``: a value that cannot work stops the
configuration from loading with one line that names it.
"""
import os
import shutil
import sys

from hpctestlib_ml.siteconfig import (apptainer_images, batch_general,
                                      container_environment,
                                      cpus_per_node, env, gpu_devices,
                                      job_venv, make_site_configuration,
                                      one_image,
                                      slurm_sched_options, system_dirs,
                                      with_container_platform)

_partition = env('HPCML_SLURM_PARTITION')
_account = env('HPCML_ACCOUNT')
_gpus = env('HPCML_GPUS_PER_NODE')
_gpu_model = env('HPCML_GPU_MODEL')
_devices = gpu_devices(_gpus, _gpu_model, 'config/slurm.py')
_cpus = cpus_per_node(env('HPCML_CPUS_PER_NODE'), _gpus, _partition)
_cpu_peak = env('HPCML_CPU_PEAK_FLOPS')
_modules = env('HPCML_MODULES')
_venv = job_venv('config/slurm.py') or os.path.dirname(os.path.dirname(
    sys.executable))

_extras = {
    'max_nodes': env('HPCML_MAX_NODES'),
    'rendezvous_address': env('HPCML_RENDEZVOUS_ADDRESS'),
}
if env('HPCML_SCALES'):
    _extras['scales'] = env('HPCML_SCALES')
if _cpu_peak:
    _extras['cpu_peak_flops'] = _cpu_peak
if env('HPCML_STORAGE_DIR'):
    _extras['storage_dir'] = env('HPCML_STORAGE_DIR')
if env('HPCML_REFERENCE_NOISE_PCT'):
    _extras['reference_noise_pct'] = env('HPCML_REFERENCE_NOISE_PCT')
for _key, _name in (('device_memory_gib', 'HPCML_DEVICE_MEMORY_GIB'),
                    ('max_time_limit', 'HPCML_MAX_TIME_LIMIT'),
                    ('exclusive', 'HPCML_EXCLUSIVE'),
                    ('rank_binding', 'HPCML_RANK_BINDING'),
                    ('loader_workers', 'HPCML_LOADER_WORKERS')):
    if env(_name) not in (None, []):
        _extras[_key] = env(_name)

_part = {
    'name': _partition or 'default',
    'descr': (f'{_gpus} x {_gpu_model or "GPU"} per node' if _gpus
              else 'CPU nodes'),
    'scheduler': env('HPCML_SCHEDULER'),
    'launcher': 'srun',
    'access': ([f'--partition={_partition}'] if _partition else []) +
              ([f'--account={_account}'] if _account else []) +
              env('HPCML_SBATCH_OPTIONS'),
    'environs': ['python'],
    'max_jobs': 8,
    'features': ['gpu'] if _gpus else ['cpu'],
    'extras': _extras,
    'env_vars': env('HPCML_ENV'),
}
if _cpus:
    _part['processor'] = {'num_cpus': _cpus}
if _devices:
    _part['devices'] = _devices
if _gpus:
    _part['resources'] = [{
        'name': 'gpu',
        'options': [env('HPCML_GPU_RESOURCE')],
    }]

_image_dir = env('HPCML_CONTAINER_DIR')
_container_modules = (env('HPCML_CONTAINER_MODULES') or
                      env('HPCML_APPTAINER_MODULES'))
_container_platform = env('HPCML_CONTAINER_PLATFORM') or (
    'Apptainer' if (_image_dir or _container_modules or
                    shutil.which('apptainer')) else None)
if _container_platform:
    _part = with_container_platform(
        _part, _container_platform,
        one_image(env('HPCML_CONTAINER_IMAGE')) or
        apptainer_images(_image_dir))

site_configuration = make_site_configuration(
    systems=[{
        'name': 'slurm',
        'descr': 'A Slurm cluster configured by HPCML_* variables',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'sched_options': slurm_sched_options(),
        **system_dirs(),
        'partitions': [_part],
    }],
    environments=[{
        'name': 'python',
        'prepare_cmds': (
            ([f'module load {" ".join(_modules)}'] if _modules else []) +
            [f'source {_venv}/bin/activate']),
        # The suite's .venv has both frameworks (pyproject extras).
        'features': ['torch', 'tensorflow'],
        'target_systems': ['slurm'],
    }, container_environment('slurm', _container_modules)],
    general=batch_general(),
)
