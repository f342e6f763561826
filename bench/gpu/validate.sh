#!/usr/bin/env bash
# The suite's first run on a GPU, in minutes: does every PyTorch workload
# run on this machine's GPU, and measure right? (docs/guide/
# gpu_validation.md.)
#
#   bench/gpu/validate.sh prepare DIR
#       On a machine with PyPI and the project's .venv: the wheels a GPU
#       machine without network needs beyond its own (CPython 3.12,
#       manylinux x86_64), in sets that one device call carries (64 MiB
#       with the working tree): DIR/set-a/{*.whl,requirements.txt,
#       phases.txt}, ..., DIR/sets.json (bench/gpu/wheelsets.py).
#
#   bench/gpu/validate.sh run PHASE[,PHASE...]|all [options] DIR OUT [-- REFRAME_OPTIONS]
#       Phases: PHASES
#       (bench/gpu/phases.py --list; phases.py says what each runs).
#       DIR: a wheel set (DIR/requirements.txt), a wheelhouse (DIR/sets.json)
#       or a virtual environment to use as it is (DIR/bin/python: CI's
#       .venv). A set is installed offline into var/gpuval/venv, made with
#       --system-site-packages over the machine's Python so that its torch
#       stays. An nvidia-smi trace runs beside each phase. Everything goes
#       under OUT; the table of every phase under OUT ends the run
#       (OUT/table.txt, OUT/summary.json).
#       --cpu         this machine's CPU, tiny size (what CI runs)
#       --pack        then pack OUT into table.txt, summary.json and
#                     validate.tar.gz (the device tool brings back 8 files)
#       --python PY   the machine's Python with torch (default: python3)
#       --budget S    end the phases S seconds after the start, install
#                     included (default 540 on a GPU: a device call is 600)
#
# Exit status: 0 every expectation held, 1 some did not (the table says
# which), 2 the validation could not run (the message names the fix).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$REPO/bench/gpu"
read -r -a PHASES <<< "$(python3 "$HERE/phases.py" --list)"
START=$(date +%s)

die() { echo "validate.sh: $*" >&2; exit 2; }

# The comment above, with the phases bench/gpu/phases.py has.
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' \
        | sed "s/^\( *Phases: \)PHASES\$/\1${PHASES[*]}/" >&2
    exit 2
}

prepare() {
    [ $# -eq 1 ] || usage
    local python="${VENV:-$REPO/.venv}/bin/python"
    [ -x "$python" ] || die "no project environment at ${python%/bin/python}: run 'make setup' first (prepare reads the versions to download from it)"
    "$python" "$HERE/wheelsets.py" "$1"
}

# The venv's site-packages directory.
site_dir() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# A venv over the machine's Python that sees its packages: with
# --system-site-packages, plus, where that Python is itself a venv (the
# device image's /opt/torch/.venv), a .pth adding that venv's
# site-packages, which --system-site-packages alone does not see. pip
# comes from the machine's Python through the same paths.
make_venv() {
    local base="$1" venv="$2" facts
    facts=$("$base" -c 'import sys, site; print(sys.executable, sys.version.split()[0]); print(sys.prefix != sys.base_prefix); print(*site.getsitepackages(), sep="\n")') \
        || die "$base does not run: name the machine's Python with --python"
    if [ -f "$venv/gpuval-base.txt" ] && [ "$(cat "$venv/gpuval-base.txt")" = "$facts" ]; then
        return
    fi
    rm -rf "$venv"
    "$base" -m venv --system-site-packages --without-pip "$venv" \
        || die "$base -m venv failed: a Python with the venv module is needed"
    local site
    site=$(site_dir "$venv/bin/python")
    if [ "$(echo "$facts" | sed -n 2p)" = True ]; then
        echo "$facts" | tail -n +3 | while read -r dir; do
            echo "import site; site.addsitedir('$dir')"
        done > "$site/gpuval-machine-venv.pth"
    fi
    echo "$REPO" > "$site/hpcml-repo.pth"
    echo "$facts" > "$venv/gpuval-base.txt"
    "$venv/bin/python" -c 'import torch' 2>/dev/null \
        || die "torch is not importable from $venv (made over $base): name the Python that has torch with --python"
    "$venv/bin/python" -m pip --version >/dev/null 2>&1 \
        || die "no pip in $base: the offline install needs the machine's pip"
}

# Install wheel set $2 into venv $1 without network.
install_set() {
    local venv="$1" set="$2" log="$3/install-$(basename "$2").log" t0
    t0=$(date +%s)
    "$venv/bin/python" -m pip install --no-index --no-deps --no-cache-dir \
        --disable-pip-version-check --find-links "$set" -r "$set/requirements.txt" \
        > "$log" 2>&1 || die "the offline install of $set failed (last lines of $log):
$(tail -5 "$log")"
    echo "validate.sh: installed $set offline in $(( $(date +%s) - t0 )) s ($log)"
    # Left out on purpose: the torch stack and the machine's own packages
    # (wheelsets.py); anything else unmet is worth reading before the table.
    "$venv/bin/python" -m pip check 2>&1 | tee -a "$log" | grep -v polars \
        | sed 's/^/validate.sh: pip check: /' || true
}

# The set of phase $2 in DIR $1 (a set or a wheelhouse).
set_of() {
    local dir="$1" phase="$2" name
    if [ -f "$dir/requirements.txt" ]; then
        tr ' ' '\n' 2>/dev/null < "$dir/phases.txt" | grep -qx "$phase" \
            || die "$dir holds the packages of phases '$(cat "$dir/phases.txt" 2>/dev/null)', not of $phase: carry the set that sets.json names for $phase"
        echo "$dir"
        return
    fi
    name=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["phases"].get(sys.argv[2], ""))' "$dir/sets.json" "$phase")
    [ -n "$name" ] && [ -f "$dir/$name/requirements.txt" ] \
        || die "$dir/sets.json names no set for phase $phase: run 'bench/gpu/validate.sh prepare $dir' again"
    echo "$dir/$name"
}

TRACE_PID=
start_trace() {
    local fields=timestamp,index,power.draw.instant,power.draw,memory.used,utilization.gpu,clocks.sm
    nvidia-smi --query-gpu=$fields --format=csv,nounits -i 0 >/dev/null 2>&1 \
        || fields=timestamp,index,power.draw,memory.used,utilization.gpu,clocks.sm
    nvidia-smi --query-gpu=$fields --format=csv,nounits -lms 200 -i 0 > "$1" 2>/dev/null &
    TRACE_PID=$!
}
stop_trace() {
    if [ -n "$TRACE_PID" ]; then
        kill "$TRACE_PID" 2>/dev/null || true
        wait "$TRACE_PID" 2>/dev/null || true
        TRACE_PID=
    fi
}
trap stop_trace EXIT

pack() {
    local out="$1" list
    list=$(mktemp)
    (cd "$out" && find . -type f ! -name table.txt ! -name summary.json \
        ! -name validate.tar.gz -size -4M | sort > "$list"
     find . -type f -size +4M -printf '%s %p\n' | sort > left-out.txt
     echo ./left-out.txt >> "$list"
     tar -czf validate.tar.gz -T "$list")
    rm -f "$list"
    (cd "$out" && find . -mindepth 1 -maxdepth 1 ! -name table.txt \
        ! -name summary.json ! -name validate.tar.gz -exec rm -rf {} +)
    echo "validate.sh: packed $out: $(ls "$out" | tr '\n' ' ')"
}

run() {
    local cpu=0 do_pack=0 base=python3 budget= extra=() args=()
    # Options may come before, between or after PHASE DIR OUT.
    while [ $# -gt 0 ]; do
        case "$1" in
            --cpu) cpu=1 ;;
            --pack) do_pack=1 ;;
            --python) base="$2"; shift ;;
            --budget) budget="$2"; shift ;;
            --) shift; extra=("$@"); break ;;
            -*) die "unknown option $1 (see bench/gpu/validate.sh with no arguments)" ;;
            *) args+=("$1") ;;
        esac
        shift
    done
    [ ${#args[@]} -eq 3 ] || usage
    local phase_arg="${args[0]}" dir="${args[1]%/}" out="${args[2]}"
    local phases=()
    if [ "$phase_arg" = all ]; then
        phases=("${PHASES[@]}")
    else
        IFS=, read -r -a phases <<< "$phase_arg"
        for p in "${phases[@]}"; do
            [[ " ${PHASES[*]} " == *" $p "* ]] || die "unknown phase $p: use one of ${PHASES[*]} or all"
        done
    fi
    if [ $cpu = 0 ]; then
        nvidia-smi -L 2>/dev/null | grep -q '^GPU' \
            || die "no NVIDIA GPU here (nvidia-smi lists none): on a machine without one add --cpu"
        budget=${budget:-540}
    fi
    local deadline=$(( START + ${budget:-1000000} ))
    mkdir -p "$out"
    out=$(cd "$out" && pwd)

    local python venv="${HPCML_GPUVAL_VENV:-$REPO/var/gpuval/venv}" sets=()
    if [ -x "$dir/bin/python" ] && [ -f "$dir/pyvenv.cfg" ]; then
        python=$(cd "$dir" && pwd)/bin/python
        "$python" -c 'import reframe, torch, hpctestlib_ml' 2>/dev/null \
            || die "$dir has no reframe, torch or hpctestlib_ml: run 'make setup' (or name a wheel set)"
        base="$python"
    elif [ -f "$dir/requirements.txt" ] || [ -f "$dir/sets.json" ]; then
        for p in "${phases[@]}"; do
            local s
            s=$(set_of "$dir" "$p") || exit 2
            [[ " ${sets[*]:-} " == *" $s "* ]] || sets+=("$s")
        done
        make_venv "$base" "$venv"
        for s in "${sets[@]}"; do install_set "$venv" "$s" "$out"; done
        python="$venv/bin/python"
    else
        die "$dir is not a wheel set (requirements.txt), a wheelhouse (sets.json) or a virtual environment (bin/python): make the sets with 'bench/gpu/validate.sh prepare var/gpuval' on a machine with PyPI and carry the set of the phase (var/gpuval/set-a)"
    fi

    local cpu_flag=() status=0
    [ $cpu = 1 ] && cpu_flag=(--cpu)
    for p in "${phases[@]}"; do
        local t0
        t0=$(date +%s)
        mkdir -p "$out/$p"
        [ $cpu = 0 ] && start_trace "$out/$p/smi.csv"
        if [ "$p" = probes ]; then
            "$python" "$HERE/probes.py" "$out" "$base" || status=$?
        else
            "$python" "$HERE/phases.py" "$p" "$out" "${cpu_flag[@]}" \
                --deadline "$deadline" -- "${extra[@]}" || status=$?
        fi
        stop_trace
        echo "validate.sh: phase $p took $(( $(date +%s) - t0 )) s"
        [ $status = 0 ] || die "phase $p could not run (exit status $status)"
    done
    "$python" "$HERE/table.py" "$out" || status=$?
    echo "validate.sh: $(( $(date +%s) - START )) s in all"
    [ $do_pack = 1 ] && pack "$out"
    return $status
}

case "${1:-}" in
    prepare) shift; prepare "$@" ;;
    run) shift; run "$@" ;;
    *) usage ;;
esac
