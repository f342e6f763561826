#!/usr/bin/env bash
# Real, unchanged runs of a few CPU cases, one ReFrame session each, into
# one HPCML_VAR_DIR: the history that bench/regression_bench.py measures the
# suite's run-to-run noise, false alarms and detection power on, and that
# `hpcml references` derives references from.
#
#   bench/history_runs.sh VAR_DIR [SESSIONS] [reframe selection options...]
#
# Default: 20 sessions of CosmoFlow, DeepLabV3Plus and MegatronGPT (1 rank,
# one task per rank).
set -euo pipefail
cd "$(dirname "$0")/.."
var_dir=${1:?usage: bench/history_runs.sh VAR_DIR [SESSIONS] [reframe options...]}
sessions=${2:-20}
shift $(( $# < 2 ? $# : 2 ))
selection=("$@")
if [ ${#selection[@]} -eq 0 ]; then
    selection=(-n 'CosmoFlow|DeepLabV3Plus|MegatronGPT' -x Container -x 2_procs -x torchrun)
fi
export HPCML_VAR_DIR=$var_dir
for i in $(seq 1 "$sessions"); do
    start=$(date +%s)
    status=0
    .venv/bin/hpcml suite "${selection[@]}" >"$var_dir.session$i.log" 2>&1 || status=$?
    echo "session $i/$sessions: exit $status, $(( $(date +%s) - start )) s"
done
