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


def takes_whole_nodes(exclusive, gpus_per_node, scheduler):
    '''Whether a case's job asks for its nodes whole (``--exclusive``,
    ReFrame's ``exclusive_access``): the partition's
    ``extras['exclusive']`` (*exclusive*) where it says, else on a batch
    scheduler's partition with GPUs: another job's traffic on a node's
    GPUs, NICs and memory moves the figures as a regression would, and
    benchmark jobs on GPU nodes are whole-node jobs at most centres
    anyway (their GPU partitions are often allocated by node).'''
    if exclusive is not None:
        return bool(exclusive)
    return bool(gpus_per_node) and scheduler not in (None, 'local')


def exports_nothing(access):
    '''Whether the partition's sbatch options (*access*) say
    ``--export`` other than ``ALL`` (``NONE``, ``NIL``, a list of names):
    sbatch then sets ``SLURM_EXPORT_ENV`` to it in the job, and every
    srun in the script reads it (sbatch(1) and srun(1), ``--export``), so
    that the tasks would start without the job script's own exports.'''
    for option in access:
        words = option.replace('=', ' ').split()
        if words and words[0] == '--export':
            value = words[1] if len(words) > 1 else ''
            return value.split(',')[0].upper() != 'ALL'
    return False


def export_lines(access, scheduler):
    '''Shell lines that pass the job script's environment to its tasks
    where *access* exports nothing to the job (:func:`exports_nothing`):
    ``SLURM_EXPORT_ENV=ALL`` for srun (what NERSC's and Slurm's own
    advice give): the job still starts clean, as the site asked.'''
    if scheduler in SLURM_SCHEDULERS and exports_nothing(access):
        return ['export SLURM_EXPORT_ENV=ALL']
    return []


def binding_options(rank_binding, launch_mode):
    '''The partition's options binding each rank (its
    ``extras['rank_binding']``, e.g. ``--gpus-per-task=1``) where a task is
    one rank (*launch_mode* ``per_task``); none under torchrun, whose one
    task a node forks all of the node's ranks.'''
    return list(rank_binding or []) if launch_mode == 'per_task' else []


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
