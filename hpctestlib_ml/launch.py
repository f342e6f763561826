"""Build the commands and environment that start a training program's ranks.

Two launch modes (:data:`hpctestlib_ml.constants.LAUNCH_MODES`):

``per_task``
    The job launcher (``srun``, ``mpirun``, or nothing locally) starts one
    task per rank; ``src/task_env.sh per_task`` maps the launcher's ids
    (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, or Open MPI's/PMI's) to
    RANK, LOCAL_RANK and WORLD_SIZE, then execs the program.
``torchrun``
    The job launcher starts one task per node running
    ``python -m torch.distributed.run`` with c10d rendezvous at
    MASTER_ADDR:MASTER_PORT, which forks the node's ranks;
    ``src/task_env.sh torchrun`` gives each node's torchrun its own address
    (``--local-addr``), or torchrun advertises the host's FQDN, and says
    whether it hosts the rendezvous store (``--rdzv-conf is_host=1|0``:
    the node MASTER_ADDR names, HPCML_RENDEZVOUS_NODE; see
    ``src/rendezvous_host.py``), or torch guesses from host names and, where
    nodes are reached by other names, no node starts the store.

Addresses follow the partition's ``rendezvous_address`` setting
(``src/node_address.sh``): MASTER_ADDR is the job's first node;
MASTER_PORT is derived from the job id, so jobs sharing a node do not
collide. Nothing here is hard-coded per site.
"""
import shlex

from hpctestlib_ml.paths import SRC_DIR

#: MASTER_PORT = PORT_BASE + job id % PORT_SPAN: below Linux's ephemeral
#: range (32768-60999), so the OS never hands it to another socket.
PORT_BASE = 20000
PORT_SPAN = 10000

#: Schedulers whose jobs see Slurm's environment.
SLURM_SCHEDULERS = ('slurm', 'squeue')

#: Launcher options that end the whole job step when one rank fails, instead
#: of leaving the others waiting in a collective or at rendezvous until
#: their timeout (30 min in PyTorch): srun's default is to wait.
FAIL_FAST_OPTIONS = {
    'srun': ['--kill-on-bad-exit=1'],
}

TASK_ENV_SCRIPT = SRC_DIR / 'task_env.sh'
NODE_ADDRESS_SCRIPT = SRC_DIR / 'node_address.sh'


def job_id_expr(scheduler):
    '''Shell expression of a number unique among the node's running jobs.'''
    if scheduler in SLURM_SCHEDULERS:
        return '${SLURM_JOB_ID}'
    return '$$'


def check_address(scheduler, address):
    '''Raise ValueError, naming the fix, if *address* cannot work.'''
    if address == 'nodeaddr':
        if scheduler not in SLURM_SCHEDULERS:
            raise ValueError("rendezvous_address 'nodeaddr' needs a Slurm "
                             "scheduler; use a template such as '{hostname}'")
    elif '{' in address.replace('{hostname}', '') or not address.strip():
        raise ValueError(f'rendezvous_address {address!r}: use a template '
                         f'with {{hostname}} (the only placeholder), '
                         f"'nodeaddr' or a fixed address")


def rendezvous_env(scheduler, address='{hostname}'):
    '''Shell lines exporting MASTER_ADDR and MASTER_PORT for the job, and
    HPCML_RENDEZVOUS_NODE, the name of the node MASTER_ADDR reaches.

    *address* says how to reach a node: a template with ``{hostname}``
    (``'{hostname}i'`` on JUWELS, whose InfiniBand names end in ``i``), a
    fixed address (``'127.0.0.1'``), or ``'nodeaddr'`` for the node's Slurm
    ``NodeAddr``.
    '''
    check_address(scheduler, address)
    if scheduler in SLURM_SCHEDULERS:
        first_node = ('hpcml_first_node=$(scontrol show hostnames '
                      '"$SLURM_JOB_NODELIST" | head -n 1)')
    else:
        first_node = 'hpcml_first_node=$(hostname)'

    lines = [f'export HPCML_RENDEZVOUS_ADDRESS={shlex.quote(address)}']
    if address == 'nodeaddr':
        # Every node's NodeAddr, looked up once here: tasks then need no
        # scontrol (which a container may lack) and do not each ask
        # slurmctld.
        lines.append(f'export HPCML_NODE_ADDRESSES="$({NODE_ADDRESS_SCRIPT} '
                     f'--job-map "$SLURM_JOB_NODELIST")"')
    return lines + [
        first_node,
        # The node whose torchrun hosts the rendezvous store.
        'export HPCML_RENDEZVOUS_NODE="$hpcml_first_node"',
        f'export MASTER_ADDR=$({NODE_ADDRESS_SCRIPT} "$hpcml_first_node")',
        f'export MASTER_PORT=$(( {PORT_BASE} + {job_id_expr(scheduler)} % '
        f'{PORT_SPAN} ))',
    ]


def launcher_options(launcher):
    '''Options for job launcher *launcher* (its ReFrame name).'''
    return list(FAIL_FAST_OPTIONS.get(launcher, []))


def thread_env(cpus_per_proc):
    '''Shell lines giving each rank its share of the node's CPUs.'''
    if cpus_per_proc:
        return [f'export OMP_NUM_THREADS={cpus_per_proc}']
    return []


def per_task_command(python, module, args):
    '''(executable, options) for one task per rank.'''
    return str(TASK_ENV_SCRIPT), ['per_task', python, '-u', '-m', module,
                                  *args]


def torchrun_command(python, module, args, num_nodes, procs_per_node, job_id):
    '''(executable, options) for one torchrun per node with c10d rendezvous.'''
    opts = ['torchrun', python, '-u', '-m', 'torch.distributed.run',
            f'--nnodes={num_nodes}',
            f'--nproc-per-node={procs_per_node}',
            '--rdzv-backend=c10d',
            '--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT',
            f'--rdzv-id={job_id}',
            '--max-restarts=0',
            '-m', module, '--', *args]
    return str(TASK_ENV_SCRIPT), opts


class ShellExpr(str):
    '''A program argument that the job script's shell must expand
    (e.g. ``--name=clip-${SLURM_JOB_ID:-$$}``): left unquoted.'''


def quote_args(args):
    '''Shell-quote program arguments (ReFrame writes options verbatim),
    except :class:`ShellExpr` ones.'''
    return [a if isinstance(a, ShellExpr) else shlex.quote(str(a))
            for a in args]
