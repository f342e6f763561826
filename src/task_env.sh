#!/bin/sh
# Per-task environment of the suite's launch modes, set on each task's own
# node; then exec the program:   task_env.sh MODE PROGRAM [ARGUMENT...]
#
# PET_LOCAL_ADDR (torchrun's --local-addr): this node's address, from
#   node_address.sh. Without it torchrun advertises the host's FQDN to the
#   other nodes, which need not resolve there or be on the fabric.
# PET_RDZV_CONF (torchrun's --rdzv-conf) in torchrun mode: is_host=1 on the
#   node MASTER_ADDR names (HPCML_RENDEZVOUS_NODE, from the job script),
#   is_host=0 elsewhere (src/rendezvous_host.py): torch's own guess, by host
#   name, finds no host where nodes are reached by other names.
# One line per task says where it landed ("hpcml launch: node=n2 task=1
#   ..."): where each rank ran, for the log and the tests.
# Provenance (src/provenance.py -> hpcml_provenance.json) from the job's
#   first task, and one energy and memory sampler per node
#   (src/energy_sampler.py -> hpcml_energy.<node>.csv, hpcml_rss.<node>.txt)
#   from each node's first task, both with the
#   program's interpreter ($1), on the node, inside the container if any.
#   On a node with a sampler this shell stays, runs the program and, when
#   it has ended, sends the sampler SIGTERM: its last sample then comes
#   after the program's timed region however soon the program exits (the
#   job's end kills what is left of it). It then ends as the program did,
#   with its status or killed by its signal. Elsewhere the program is
#   exec'd.
# MODE per_task: RANK, LOCAL_RANK and WORLD_SIZE (torch.distributed's env://)
#   from the job launcher's per-task ids: srun, Open MPI, PMI; rank 0 of 1
#   for a single local task. (In torchrun mode torchrun sets them.)
# Every task runs under src/reaper.py, which takes the task's PID (exec)
#   and runs this script again as its child (HPCML_REAPER names it): when
#   the task ends, or a signal ends it (ReFrame's cancel, a time limit,
#   scancel, Ctrl-C), every process below it ends too, torchrun's workers
#   in their own sessions and whatever they left. $2 is the program's
#   interpreter in both modes. (HPCML_REAPER is this shell's own PID where
#   the reaper could not be one and exec'd it.)
set -eu
here=$(dirname "$0")
case "${HPCML_REAPER:-}" in
    "$PPID"|"$$") ;;
    *) exec "$2" -S "$here/reaper.py" "$0" "$@" ;;
esac
mode="$1"
shift
node="${SLURMD_NODENAME:-$(hostname)}"
if [ -z "${PET_LOCAL_ADDR:-}" ]; then
    PET_LOCAL_ADDR=$("$here/node_address.sh" "$node")
    export PET_LOCAL_ADDR
fi
if [ "$mode" = torchrun ]; then
    # $1 is the Python that runs torchrun.
    PET_RDZV_CONF=$("$1" "$here/rendezvous_host.py")
    export PET_RDZV_CONF
fi
if [ "$mode" = per_task ]; then
    export RANK="${RANK:-${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}}}"
    export LOCAL_RANK="${LOCAL_RANK:-${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}}}"
    export WORLD_SIZE="${WORLD_SIZE:-${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}}}"
fi
landed="node=$node task=${SLURM_PROCID:-${RANK:-0}} mode=$mode"
landed="$landed address=$PET_LOCAL_ADDR master=${MASTER_ADDR:-}:${MASTER_PORT:-}"
[ "$mode" != torchrun ] || landed="$landed rdzv_conf=$PET_RDZV_CONF"
echo "hpcml launch: $landed" >&2
if [ "${SLURM_PROCID:-${RANK:-0}}" = 0 ]; then
    "$1" "$here/provenance.py" > hpcml_provenance.json 2>/dev/null || true
fi
if [ "$mode" = torchrun ] || [ "${LOCAL_RANK:-0}" = 0 ]; then
    "$1" "$here/energy_sampler.py" "hpcml_energy.$node.csv" \
        "hpcml_rss.$node.txt" 2>/dev/null &
    sampler=$!
    status=0
    "$@" || status=$?
    kill -TERM "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    if [ "$status" -gt 128 ] && [ "$status" -lt 160 ]; then
        # The program died of a signal: so does this task, as if it had
        # been exec'd (srun and torchrun then report the signal).
        kill -"$((status - 128))" $$
    fi
    exit "$status"
fi
exec "$@"
