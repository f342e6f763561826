"""A GPU site's configuration, written by hand: 4 nodes of 4 x
A100-SXM4-80GB and 2 x 32 cores, Slurm (partition ``gpu``, account
``proj1``, a MaxTime of 2 hours), Apptainer on the compute nodes.

The worked example of the documentation's "A GPU site, step by step"
(docs/guide/cluster.md): every fact a GPU partition needs, each in its one
place. Copy it to ``config/systems/<site>.py`` and change the facts to
your cluster's; see the job scripts it writes without submitting
anything:

    reframe -C docs/examples/gpu_site_config.py -c checks \\
        -n '^MMoCLIP%scale=2_nodes' --dry-run
"""
import os
import sys

from hpctestlib_ml.siteconfig import (container_environment, env, job_venv,
                                      make_site_configuration,
                                      slurm_sched_options, system_dirs,
                                      with_apptainer)

# -- 1. The environment the jobs run in ---------------------------------
# A virtual environment with the suite's packages on a file system the
# nodes mount at the same path: HPCML_VENV, else the one running ReFrame
# (make setup makes .venv in the checkout).
VENV = job_venv('docs/examples/gpu_site_config.py') or os.path.dirname(
    os.path.dirname(os.path.abspath(sys.executable)))

# -- 2. The partition ---------------------------------------------------
PARTITION = {
    'name': 'gpu',
    'descr': '4 x A100-SXM4-80GB and 128 hardware threads a node',
    'scheduler': 'slurm',
    'launcher': 'srun',
    # sbatch options of every job: where it goes and who pays, and what
    # the centre wants of every job (all of a node's memory; a job that
    # starts clean of the submitting shell: the suite then passes the job
    # script's own environment to its tasks).
    'access': ['--partition=gpu', '--account=proj1', '--mem=0',
               '--export=NONE'],
    'environs': ['python'],
    'max_jobs': 8,
    # The CPUs Slurm gives one node, as --cpus-per-task counts them (here
    # hardware threads: 2 x 32 cores x 2): a rank gets its share, as
    # --cpus-per-task, OMP_NUM_THREADS and at most as many loader workers.
    'processor': {'num_cpus': 128},
    # The model is a key of the GPU model table (docs: Settings, GPU
    # models): an A100-SXM4-80GB is an A100.
    'devices': [{'type': 'gpu', 'model': 'A100', 'num_devices': 4}],
    'resources': [{'name': 'gpu',
                   'options': ['--gres=gpu:{num_gpus_per_node}']}],
    'features': ['gpu'],
    # -- 3. The site's facts the checks read (docs: Settings, extras) ------
    'extras': {
        'max_nodes': 4,
        'scales': ['1_node', '2_nodes', '4_nodes'],
        # An A100 comes with 40 or 80 GB: the memory check needs which.
        'device_memory_gib': 80,
        # Slurm's MaxTime of the partition: no case asks for more.
        'max_time_limit': '2h',
        # A GPU to each rank where a task is one rank; whole nodes
        # (--exclusive) are the default on a GPU partition.
        'rank_binding': ['--gpus-per-task=1'],
        # Loader processes a rank: fewer than its 32 CPUs.
        'loader_workers': 8,
        # Where the Storage component reads and writes: the parallel file
        # system's scratch, expanded by the job's shell.
        'storage_dir': '$SCRATCH',
    },
}

# -- 4. The system, its environments and containers ---------------------
site_configuration = make_site_configuration(
    systems=[{
        'name': 'mycentre',
        'descr': 'A 4-node A100 cluster',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'sched_options': slurm_sched_options(),
        **system_dirs(),
        # The *Container checks with Apptainer: the images of
        # HPCML_CONTAINER_DIR (<framework>.sif), else the suite's
        # (make image, var/image/).
        'partitions': [with_apptainer(PARTITION,
                                      env('HPCML_CONTAINER_DIR'))],
    }],
    environments=[{
        'name': 'python',
        'prepare_cmds': [f'source {VENV}/bin/activate'],
        'features': ['torch', 'tensorflow'],
        'target_systems': ['mycentre'],
    }, container_environment('mycentre')],
)
