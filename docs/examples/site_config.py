"""A site configuration written from scratch: the project's Slurm cluster.

The worked example of the documentation's "Running on your cluster": the
two-node cluster that ``tests/slurm/cluster.sh start DIR`` makes on one
machine (partition ``ci``, nodes ``n1`` and ``n2`` of one CPU each, reached
at the addresses ``n1i``, ``n2i``), described by its facts rather than by
``HPCML_*`` variables as ``config/slurm.py`` does. Copy it to
``config/systems/<site>.py`` and change the facts to your cluster's.

    . DIR/env.sh          # SLURM_CONF of the cluster in DIR
    reframe -C docs/examples/site_config.py -c checks -r --mode smoke
"""
import os
import sys

from hpctestlib_ml.siteconfig import (make_site_configuration,
                                      slurm_sched_options, system_dirs)

# -- 1. The Python environment the jobs run in --------------------------
# The suite's .venv (make setup), on a file system the nodes see. A site
# with PyTorch from modules loads them first (see config/systems/
# juwels_booster.py).
VENV = os.path.dirname(os.path.dirname(os.path.abspath(
    sys.executable)))

# -- 2. The partition ---------------------------------------------------
PARTITION = {
    'name': 'ci',
    'descr': '2 nodes, 1 CPU each',
    # ReFrame's 'squeue' needs no accounting; 'slurm' polls sacct.
    'scheduler': 'squeue',
    'launcher': 'srun',
    # What sbatch needs to land on the partition (and an account, where
    # the site charges one: '--account=myproject').
    'access': ['--partition=ci'],
    'environs': ['python'],
    'max_jobs': 8,
    'time_limit': '20m',
    # CPUs Slurm gives one node: each rank gets --cpus-per-task of them.
    'processor': {'num_cpus': 1},
    # No GPUs here, so the size 'auto' is 'tiny'. A GPU partition says
    # 'features': ['gpu'] and its devices, e.g.
    #   'devices': [{'type': 'gpu', 'model': 'A100', 'num_devices': 4}],
    #   'resources': [{'name': 'gpu',
    #                  'options': ['--gres=gpu:{num_gpus_per_node}']}],
    'features': ['cpu'],
    # -- 3. The site's facts the checks read (docs: Settings, extras) ------
    'extras': {
        'max_nodes': 2,
        'scales': ['1_node', '2_nodes'],
        # Nodes are reached at their Slurm NodeAddr (n1i), not at their
        # host names (n1): as JUWELS' jwb0001 -> jwb0001i.
        'rendezvous_address': 'nodeaddr',
        # How far the figures move from night to night with nothing
        # changed: no history reference is narrower (this cluster's nodes
        # are the vCPUs of one shared VM; tests/slurm/cluster.sh's env.sh
        # declares the same).
        'reference_noise_pct': 40,
    },
}

# -- 4. The system and its environment ----------------------------------
site_configuration = make_site_configuration(
    systems=[{
        'name': 'mycluster',
        'descr': "The project's 2-node Slurm cluster (tests/slurm/cluster.sh)",
        # The host names where this file applies ('.*': wherever it is
        # loaded with -C).
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'sched_options': slurm_sched_options(),
        **system_dirs(),
        'partitions': [PARTITION],
    }],
    environments=[{
        'name': 'python',
        'prepare_cmds': [f'source {VENV}/bin/activate'],
        # What the checks need of an environment: torch for the PyTorch
        # workloads, tensorflow for ResNet50TF.
        'features': ['torch', 'tensorflow'],
        'target_systems': ['mycluster'],
    }],
)
