#!/usr/bin/env bash
# Real sessions on the project's Slurm cluster (tests/slurm/cluster.sh) for
# bench/slow_node_bench.py: each session is a node sweep (--distribute=all:
# CosmoFlow tiny, one node, one task, 200 steps, once on every node) and
# then a 2-node run of the same case, each ReFrame session into a var
# directory of its own (one sweep is one night's sweep).
#
#   bench/slow_node_runs.sh CLUSTER_DIR OUT_DIR SESSIONS [NODE PERCENT]
#
# With NODE and PERCENT, NODE is held to PERCENT % of one core for the
# sessions (cluster.sh slow) and released after them, whatever happens.
# Writes OUT_DIR/<label>/sNNN/{sweep,two_nodes}/ (label: unslowed, or
# slow-NODE-PERCENT) and OUT_DIR/<label>/sessions.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cluster=${1:?usage: bench/slow_node_runs.sh CLUSTER_DIR OUT_DIR SESSIONS [NODE PERCENT]}
out=${2:?usage: bench/slow_node_runs.sh CLUSTER_DIR OUT_DIR SESSIONS [NODE PERCENT]}
sessions=${3:-30}
node=${4:-}
percent=${5:-20}
label=unslowed
if [ -n "$node" ]; then
    label=slow-$node-$percent
    tests/slurm/cluster.sh slow "$cluster" "$node" "$percent"
    trap 'tests/slurm/cluster.sh unslow "$cluster" "$node"' EXIT
fi
# shellcheck disable=SC1091
. "$cluster/env.sh"
unset RFM_CONFIG_FILES
export HPCML_CACHE_DIR=$out/cache
mkdir -p "$out/$label"
case_=(-n '^CosmoFlow%scale=1_node%launch_mode=per_task' --mode smoke -S steps=200)
two=(-n '^CosmoFlow%scale=2_nodes%launch_mode=per_task' --mode smoke -S steps=200)

run() {   # run VAR_DIR REFRAME_OPTIONS...: one session; its exit status
    local var=$1; shift
    mkdir -p "$var"
    HPCML_VAR_DIR=$var "$repo/.venv/bin/hpcml" suite -C "$repo/config/slurm.py" \
        "$@" >"$var.out" 2>&1
}

for i in $(seq -f '%03g' 1 "$sessions"); do
    start=$(date +%s)
    sweep=0; pair=0
    run "$out/$label/s$i/sweep" --distribute=all "${case_[@]}" || sweep=$?
    run "$out/$label/s$i/two_nodes" "${two[@]}" || pair=$?
    echo "session $i/$sessions ($label): sweep exit $sweep, 2 nodes exit $pair, $(( $(date +%s) - start )) s" \
        | tee -a "$out/$label/sessions.log"
done
