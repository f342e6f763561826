#!/usr/bin/env bash
# A real history with one component really degraded for its second half:
# the loopback network that this machine's 2-rank cases talk over is
# rate-limited (a token bucket, `tc qdisc ... tbf`, on `lo` of a network
# namespace of the second half's own: the machine's network is untouched).
# Each session runs a 2-rank training case and the collectives benchmark,
# as a nightly suite would; `hpcml report` on the result must tie the
# training case's slowdown to the network (tests/test_component_causes.py
# reads the copy kept in tests/data/history/network_degraded).
#
#   bench/component_history.sh VAR_DIR [SESSIONS_PER_HALF] [RATE]
#
# Default: 6 sessions a half, the second half's loopback at 1gbit. Needs
# root (unshare -n, tc).
set -euo pipefail
cd "$(dirname "$0")/.."
var_dir=$(realpath -m "${1:?usage: bench/component_history.sh VAR_DIR [SESSIONS_PER_HALF] [RATE]}")
sessions=${2:-6}
rate=${3:-1gbit}
selection=(-n '^(CosmoFlow|Collectives)%scale=2_procs%launch_mode=torchrun')
export HPCML_VAR_DIR=$var_dir
mkdir -p "$var_dir"

session() {
    local label=$1 status=0 start
    start=$(date +%s)
    shift
    "$@" .venv/bin/hpcml suite "${selection[@]}" \
        >"$var_dir/$label.log" 2>&1 || status=$?
    echo "$label: exit $status, $(( $(date +%s) - start )) s"
}

# The second half's namespace: only lo, up, behind a token bucket of RATE.
degraded() {
    unshare -n bash -c "ip link set lo up &&
        tc qdisc add dev lo root tbf rate $rate burst 256kb limit 64mb &&
        exec \"\$@\"" degraded "$@"
}

for i in $(seq 1 "$sessions"); do session "normal$i" env; done
for i in $(seq 1 "$sessions"); do session "degraded$i" degraded; done
