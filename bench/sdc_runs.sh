#!/usr/bin/env bash
# Unchanged runs of the check of silent data corruption
# (SilentDataCorruption, 2 nodes, one rank each, tiny) on the project's
# Slurm cluster (tests/slurm/cluster.sh), for bench/sdc_bench.py: a
# ReFrame session of KNOWN runs (--repeat), then `hpcml references
# --write` of the digest they agreed on into a references directory of
# the bench's own, then a session of the other RUNS - KNOWN runs held
# against it (HPCML_REFERENCES_DIR), as a site's nights would be. Nothing
# is changed: a run that names a wrong answer is a false alarm.
#
#   bench/sdc_runs.sh CLUSTER_DIR OUT_DIR [RUNS [KNOWN]]
#
# Writes OUT_DIR/{history,judged}/ (var directories), their .out,
# OUT_DIR/references/, OUT_DIR/references.out and OUT_DIR/sessions.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
usage='usage: bench/sdc_runs.sh CLUSTER_DIR OUT_DIR [RUNS [KNOWN]]'
cluster=${1:?$usage}
out=${2:?$usage}
runs=${3:-50}
known=${4:-5}
[ "$runs" -gt "$known" ] && [ "$known" -ge 2 ] \
    || { echo "sdc_runs.sh: RUNS must exceed KNOWN, KNOWN be 2 or more" >&2; exit 2; }
# shellcheck disable=SC1091
. "$cluster/env.sh"
unset RFM_CONFIG_FILES
export HPCML_CACHE_DIR=$out/cache
mkdir -p "$out"
case_=(-n '^SilentDataCorruption%scale=2_nodes%launch_mode=per_task')

session() {   # session LABEL VAR_DIR REFRAME_OPTIONS...: one ReFrame session
    local label=$1 var=$2 start status=0; shift 2
    start=$(date +%s)
    mkdir -p "$var"
    HPCML_VAR_DIR=$var "$repo/.venv/bin/hpcml" suite -C "$repo/config/slurm.py" \
        "$@" >"$var.out" 2>&1 || status=$?
    echo "$label: exit $status, $(( $(date +%s) - start )) s" | tee -a "$out/sessions.log"
}

session "history ($known runs)" "$out/history" "${case_[@]}" --repeat "$known"
rm -rf "$out/references"
cp -r "$repo/config/references" "$out/references"
"$repo/.venv/bin/hpcml" references --perflogs "$out/history/perflogs" \
    --system slurm --min-runs "$known" --write "$out/references" \
    >"$out/references.out" 2>&1
HPCML_REFERENCES_DIR=$out/references session \
    "judged ($(( runs - known )) runs)" "$out/judged" "${case_[@]}" \
    --repeat $(( runs - known ))
