"""Whether this node's torchrun hosts the job's c10d rendezvous store, from
the task's environment: pure and standard library only. ``task_env.sh
torchrun`` runs it on each node and hands torchrun the answer as
``PET_RDZV_CONF`` (``--rdzv-conf is_host=1|0``).

Told nothing, torch's c10d handler guesses: a node hosts the store if the
rendezvous endpoint names one of its host name's addresses
(``_create_tcp_store`` in torch/distributed/elastic/rendezvous/
c10d_rendezvous_backend.py, by ``_matches_machine_hostname`` in its
utils.py). Where nodes are reached by another name than their host name
(JUWELS: ``jwb0001i``, the InfiniBand address), no node matches, none
starts the store, and the rendezvous times out, on one node as on many.
CARAML states it instead (``--rdzv_conf=is_host=...`` from SLURM_NODEID, in
FZJ-JSC/CARAML llm_training/llm_benchmark_nvidia_amd.yaml).

Here the host is the node that MASTER_ADDR names: the job script exports
that node's name as HPCML_RENDEZVOUS_NODE (the job's first node,
``hpctestlib_ml.launch.rendezvous_env``), and each task compares its own
node's name with it: Slurm's SLURMD_NODENAME, else the host name (the
local launcher's one node, or a non-Slurm launcher, where the job script
took ``hostname`` too). Under srun over the whole job this is the node with
SLURM_NODEID 0, but the name is what MASTER_ADDR was made from, so the two
cannot disagree whatever the launcher.

torch reads is_host with ``RendezvousParameters.get_as_bool``, which takes
1/0, true/false, yes/no (any case) and refuses anything else.
"""
import os
import socket
import sys


class RendezvousHostError(RuntimeError):
    '''The task's environment cannot say which node hosts the rendezvous.'''


def node_name(env, hostname):
    '''This node's name as the job script names nodes: Slurm's, else the
    host name.'''
    return env.get('SLURMD_NODENAME') or hostname


def hosts_rendezvous(env, hostname):
    '''True if this node (host name *hostname*, environment *env*) is the
    one whose torchrun starts the rendezvous store.'''
    first = env.get('HPCML_RENDEZVOUS_NODE', '').strip()
    if not first:
        raise RendezvousHostError(
            'HPCML_RENDEZVOUS_NODE is not set: the job script must export '
            'the name of the node MASTER_ADDR names (the lines of '
            'hpctestlib_ml.launch.rendezvous_env)')
    return node_name(env, hostname) == first


def rdzv_conf(env, hostname):
    '''torchrun's ``--rdzv-conf`` for this node: ``is_host=1`` or
    ``is_host=0``, after any other options already in PET_RDZV_CONF.'''
    kept = [kv for kv in env.get('PET_RDZV_CONF', '').split(',')
            if kv.strip() and kv.split('=', 1)[0].strip() != 'is_host']
    is_host = int(hosts_rendezvous(env, hostname))
    return ','.join(kept + [f'is_host={is_host}'])


def main():
    try:
        print(rdzv_conf(os.environ, socket.gethostname()))
    except RendezvousHostError as err:
        print(f'rendezvous_host.py: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
