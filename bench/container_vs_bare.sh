#!/usr/bin/env bash
# The same case on the host's Python and in the suite's image (Podman),
# alternately, on the project's Slurm cluster (tests/slurm/cluster.sh):
# PAIRS sessions of each, bare first, each into a var directory of its
# own; then bench/container_vs_bare.py prints each figure's medians and
# the container's ratio to the bare case's.
#
#   bench/container_vs_bare.sh CLUSTER_DIR OUT_DIR [PAIRS] [CASE] [STEPS]
#
# CASE: a check's case without its name (default the 2-node CosmoFlow
# case, scale=2_nodes%launch_mode=per_task); CHECK: $CHECK (default
# CosmoFlow). Needs the image (make image) and the cluster started.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
usage='usage: bench/container_vs_bare.sh CLUSTER_DIR OUT_DIR [PAIRS] [CASE] [STEPS]'
cluster=${1:?$usage}
out=${2:?$usage}
pairs=${3:-4}
case_=${4:-scale=2_nodes%launch_mode=per_task}
steps=${5:-60}
check=${CHECK:-CosmoFlow}
# shellcheck disable=SC1091
. "$cluster/env.sh"
unset RFM_CONFIG_FILES
export HPCML_CACHE_DIR=$out/cache HPCML_CONTAINER_PLATFORM=Podman
mkdir -p "$out"

run() {   # run VAR_DIR CHECK: one session; its exit status
    local var=$1 name=$2
    mkdir -p "$var"
    HPCML_VAR_DIR=$var "$repo/.venv/bin/hpcml" suite -C "$repo/config/slurm.py" \
        -n "^$name%$case_" --mode smoke -S "steps=$steps" >"$var.out" 2>&1
}

for i in $(seq -f '%02g' 1 "$pairs"); do
    for name in "$check" "${check}Container"; do
        start=$(date +%s)
        status=0
        run "$out/p$i/$name" "$name" || status=$?
        echo "pair $i/$pairs $name: exit $status, $(( $(date +%s) - start )) s" \
            | tee -a "$out/sessions.log"
    done
done
"$repo/.venv/bin/python" "$repo/bench/container_vs_bare.py" "$out" "$check"
