#!/usr/bin/env bash
# A throwaway two-node Slurm cluster on this machine, for the suite's own
# tests (as root, on Debian or Ubuntu).
#
#   cluster.sh install [--accounting]   apt-get the daemons (slurm-wlm, munge;
#                                       with --accounting slurmdbd, mariadb)
#   cluster.sh start DIR [--accounting] start munged, slurmctld and two
#                                       slurmd (n1, n2); with --accounting
#                                       also MariaDB and slurmdbd, so that
#                                       sacct (ReFrame's 'slurm' scheduler)
#                                       works. Everything lives under DIR.
#   cluster.sh stop DIR                 cancel jobs, stop the daemons by PID,
#                                       kill what the cluster's jobs left
#   cluster.sh status DIR               list the cluster's live processes;
#                                       exit 1 if there are any
#   cluster.sh env DIR                  print the environment that points
#                                       Slurm's commands and config/slurm.py
#                                       at the cluster (also in DIR/env.sh)
#   cluster.sh exec DIR COMMAND...      run COMMAND in that environment,
#                                       resolving the nodes' names as they
#                                       do (srun and salloc need it; sbatch,
#                                       squeue, scontrol and ReFrame do not)
#   cluster.sh slow DIR NODE [PERCENT]  hold NODE's slurmd and every process
#                                       it starts (its jobs) to PERCENT % of
#                                       one core (default 20): a slow node
#   cluster.sh unslow DIR NODE          lift that limit (stop lifts all)
#   cluster.sh limit-memory DIR NODE MIB
#                                       limit NODE's slurmd and its jobs to
#                                       MIB MiB of memory together, no swap
#   cluster.sh unlimit-memory DIR NODE  lift it (stop lifts all)
#   cluster.sh node-exec DIR NODE COMMAND...
#                                       COMMAND as NODE's jobs see the
#                                       machine (its mount namespace: mount
#                                       a node-local file system there)
#
# Nodes n1 and n2 are two slurmd on different ports (Debian builds Slurm
# with multiple-slurmd support), each started under `unshare --uts` with
# its own hostname, so jobs see the node they run on. Each node is reached
# by another name than its host name, as on JUWELS (jwb0001 -> jwb0001i,
# InfiniBand): NodeAddr is n1i, n2i. The cluster's hosts file (DIR/etc/hosts,
# bind-mounted over /etc/hosts in a mount namespace of the daemons' own,
# which their jobs inherit) resolves the host names n1, n2 to 127.0.10.N and
# the node addresses n1i, n2i to 127.0.11.N: loopback addresses, so every
# node can listen on and reach them all, but a node's address is not among
# its host name's, so torch's guess of who hosts the rendezvous (by host
# name) fails there as it does on JUWELS. The suite's config reaches nodes
# through `rendezvous_address: nodeaddr`, or the template `{hostname}i`.
# The rest of the machine resolves none of these names. Each node has one
# CPU; both share this machine.
#
# A slow node (`slow`): a CPU cgroup of the node's own with a bandwidth
# quota (CFS bandwidth control: cgroup v1's cpu.cfs_quota_us, or v2's
# cpu.max), holding the node's slurmd and what is running under it; what
# slurmd starts later (slurmstepd, the job's tasks) inherits the group at
# fork, since the cluster's TaskPlugin=task/none moves nothing. Unlike a
# CPU hog beside the node, the quota slows that node alone, by a set
# factor, and costs the machine nothing. The period is 10 ms, not the
# default 100 ms, so that a throttled process is held back evenly, every
# few milliseconds, rather than for 80 ms at a time.
#
# Ports: HPCML_SLURM_PORT_BASE (default 16817) and the next 14. Nodes:
# HPCML_SLURM_NODES (default 2, at most 10) at start, n1 .. nN: a node
# sweep on more nodes than two gives the slow-node score a partition.
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }

port_base=${HPCML_SLURM_PORT_BASE:-16817}
ctld_port=$port_base
dbd_port=$((port_base + 2))
db_port=$((port_base + 3))
node_port() { echo $((port_base + 4 + $1)); }
node_count=${HPCML_SLURM_NODES:-2}
[[ "$node_count" =~ ^[0-9]+$ ]] && [ "$node_count" -ge 1 ] && [ "$node_count" -le 10 ] \
    || die "HPCML_SLURM_NODES must be 1..10 (one port each), not '$node_count'"
mapfile -t nodes < <(seq -f 'n%g' 1 "$node_count")
partition=ci

# The address of node N (1, 2, ...) under its host name and under its
# NodeAddr (the host name plus 'i').
host_ip() { echo "127.0.10.$1"; }
node_ip() { echo "127.0.11.$1"; }
node_addr() { echo "${1}i"; }

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root (slurmd starts jobs as any user)"
}

install() {
    need_root
    local pkgs=(slurm-wlm munge)
    [ "${1:-}" = --accounting ] && pkgs+=(slurmdbd mariadb-server)
    local missing=()
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' \
            || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        command -v apt-get >/dev/null || die "no apt-get: install ${missing[*]} by hand"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# Wait up to $1 seconds for command "${@:2}" to succeed.
wait_for() {
    local limit=$1; shift
    local t=0
    until "$@" >/dev/null 2>&1; do
        t=$((t + 1))
        [ $t -le $((limit * 2)) ] || return 1
        sleep 0.5
    done
}

write_conf() {
    local dir=$1 accounting=$2
    local host; host=$(hostname)
    {
        echo "ClusterName=hpcmlci"
        echo "SlurmctldHost=$host(127.0.0.1)"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        [ "$accounting" = yes ] || echo "AuthInfo=socket=$dir/munge/munge.socket"
        echo "SlurmctldPort=$ctld_port"
        echo "StateSaveLocation=$dir/state"
        echo "SlurmdSpoolDir=$dir/spool/%n"
        echo "SlurmctldPidFile=$dir/run/slurmctld.pid"
        echo "SlurmdPidFile=$dir/run/slurmd-%n.pid"
        echo "SlurmctldLogFile=$dir/log/slurmctld.log"
        echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "MpiDefault=none"
        echo "SchedulerType=sched/backfill"
        echo "ReturnToService=2"
        # Quick turnaround for tests: jobs are killed 5 s after SIGTERM,
        # time limits are enforced without grace.
        echo "KillWait=5"
        echo "OverTimeLimit=0"
        echo "SlurmdTimeout=30"
        echo "MessageTimeout=10"
        if [ "$accounting" = yes ]; then
            echo "AccountingStorageType=accounting_storage/slurmdbd"
            echo "AccountingStorageHost=127.0.0.1"
            echo "AccountingStoragePort=$dbd_port"
        fi
        local i=0
        for n in "${nodes[@]}"; do
            i=$((i + 1))
            echo "NodeName=$n NodeAddr=$(node_addr $n) Port=$(node_port $i) CPUs=1 State=UNKNOWN"
        done
        echo "PartitionName=$partition Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP"
    } > "$dir/etc/slurm.conf"
}

write_hosts() {
    local dir=$1 i=0 n
    {
        cat /etc/hosts
        for n in "${nodes[@]}"; do
            i=$((i + 1))
            echo "$(host_ip $i) $n"
            echo "$(node_ip $i) $(node_addr $n)"
        done
    } > "$dir/etc/hosts"
}

# Run "$@" with the cluster's hosts file as /etc/hosts, in a mount namespace
# of its own (and with host name NAME unless it is empty), so that it and
# what it starts resolve the nodes' names: with_cluster_hosts DIR NAME CMD...
with_cluster_hosts() {
    local hosts=$1/etc/hosts name=$2; shift 2
    unshare --mount ${name:+--uts} sh -c '
        mount --bind "$0" /etc/hosts || exit 1
        [ -z "$1" ] || hostname "$1" || exit 1
        shift
        exec "$@"' "$hosts" "$name" "$@"
}

start_accounting() {
    local dir=$1
    mkdir -p "$dir/mysql" /run/munge
    command -v slurmdbd >/dev/null || die "no slurmdbd: run '$0 install --accounting'"
    # slurmdbd talks to munged on the default socket only.
    if [ -S /run/munge/munge.socket.2 ] && munge -n >/dev/null 2>&1 </dev/null; then
        die "a munged already serves /run/munge/munge.socket.2; stop it first"
    fi
    munged --force --key-file="$dir/munge/munge.key" \
        --socket=/run/munge/munge.socket.2 --pid-file="$dir/run/munged.pid" \
        --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"

    mariadb-install-db --user=root --datadir="$dir/mysql" \
        --auth-root-authentication-method=normal >"$dir/log/mariadb-install.log" 2>&1
    mariadbd --user=root --datadir="$dir/mysql" --port="$db_port" \
        --bind-address=127.0.0.1 --socket="$dir/run/mysqld.sock" \
        --pid-file="$dir/run/mariadbd.pid" --log-error="$dir/log/mariadb.log" \
        </dev/null >/dev/null 2>&1 &
    wait_for 30 mariadb --socket="$dir/run/mysqld.sock" -uroot -e 'select 1' \
        || die "MariaDB did not start: see $dir/log/mariadb.log"
    mariadb --socket="$dir/run/mysqld.sock" -uroot <<SQL
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'hpcml';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL
    cat > "$dir/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$dir/run/slurmdbd.pid
LogFile=$dir/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=hpcml
StorageLoc=slurm_acct_db
CONF
    chmod 600 "$dir/etc/slurmdbd.conf"
    # slurmdbd reads slurmdbd.conf beside $SLURM_CONF.
    slurmdbd \
        || die "slurmdbd did not start: see $dir/log/slurmdbd.log"
    wait_for 30 sacctmgr -i list cluster \
        || die "slurmdbd does not answer: see $dir/log/slurmdbd.log"
    sacctmgr -i add cluster hpcmlci >/dev/null 2>&1 || true
}

start() {
    need_root
    local dir=${1:?usage: cluster.sh start DIR [--accounting]}
    local accounting=no
    [ "${2:-}" = --accounting ] && accounting=yes
    command -v slurmctld >/dev/null || die "no slurmctld: run '$0 install' first"
    [ ! -e "$dir/run/slurmctld.pid" ] || die "$dir holds a cluster already: '$0 stop $dir' first"
    mkdir -p "$dir"/{etc,state,log,run,munge}
    for n in "${nodes[@]}"; do mkdir -p "$dir/spool/$n"; done
    dir=$(cd "$dir" && pwd)
    export SLURM_CONF="$dir/etc/slurm.conf"
    # Every daemon and job process carries the marker, so `stop` finds what
    # a killed job left behind.
    export HPCML_SLURM_CLUSTER="$dir"

    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 700 "$dir/munge"; chmod 400 "$dir/munge/munge.key"
    # A cluster that fails to start is stopped: no daemon outlives us.
    started=no
    trap "[ \$started = yes ] || stop '$dir' >/dev/null" EXIT
    write_conf "$dir" "$accounting"
    write_hosts "$dir"
    write_env "$dir" "$accounting"

    if [ "$accounting" = yes ]; then
        start_accounting "$dir"
    else
        munged --force --key-file="$dir/munge/munge.key" \
            --socket="$dir/munge/munge.socket" --pid-file="$dir/run/munged.pid" \
            --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
    fi

    # slurmctld reaches the nodes at their NodeAddr: it resolves them too.
    with_cluster_hosts "$dir" '' slurmctld -f "$SLURM_CONF" \
        || die "slurmctld did not start: see $dir/log/slurmctld.log"
    for n in "${nodes[@]}"; do
        with_cluster_hosts "$dir" "$n" slurmd -f "$SLURM_CONF" -N "$n" \
            || die "slurmd $n did not start: see $dir/log/slurmd-$n.log"
    done
    if ! wait_for 60 sh -c "sinfo -h -p $partition -t idle -o '%D' | grep -qx ${#nodes[@]}"; then
        sinfo -N >&2 || true
        die "nodes did not become idle in 60 s: see $dir/log/"
    fi
    started=yes
    echo "Slurm cluster up in $dir: $(sinfo -h -o '%P %D %t %N')"
}

write_env() {
    local dir=$1 accounting=$2
    cat > "$dir/env.sh" <<ENV
# The environment of the cluster in $dir (see tests/slurm/cluster.sh).
export SLURM_CONF=$dir/etc/slurm.conf
export HPCML_SLURM_CLUSTER=$dir
export HPCML_SLURM_PARTITION=$partition
# ReFrame's squeue scheduler needs no accounting; with --accounting,
# HPCML_SCHEDULER=slurm (sacct) works too.
export HPCML_SCHEDULER=squeue
export HPCML_SLURM_ACCOUNTING=$accounting
export HPCML_CPUS_PER_NODE=1
export HPCML_MAX_NODES=${#nodes[@]}
export HPCML_SCALES=1_node,2_nodes
export HPCML_RENDEZVOUS_ADDRESS=nodeaddr
# squeue on this cluster is a local call: poll each job at least once a
# second (ReFrame's default decays to one poll every 10 s, which saw the
# tests' minute-long jobs end 3-5 s late).
export HPCML_BATCH_POLL_RATE_MIN=1
# How far this partition's figures move with nothing changed
# (extras['reference_noise_pct']): its nodes are the vCPUs of one VM that
# shares its host, and with nothing slowed one ran CosmoFlow up to 24.9 %
# slower than the other (bench/README.md, "2026-11-27"). A sweep calls no
# node within it slow; a node held to a fifth of a core is 82-88 % slower.
export HPCML_REFERENCE_NOISE_PCT=40
ENV
}

pids_of_cluster() {
    # Processes whose environment carries this cluster's marker or config.
    local dir=$1 p
    for p in /proc/[0-9]*; do
        [ "${p#/proc/}" != $$ ] || continue
        if tr '\0' '\n' 2>/dev/null < "$p/environ" \
                | grep -qxF -e "HPCML_SLURM_CLUSTER=$dir" -e "SLURM_CONF=$dir/etc/slurm.conf"; then
            echo "${p#/proc/}"
        fi
    done
}

stop() {
    local dir=${1:?usage: cluster.sh stop DIR}
    [ -d "$dir" ] || { echo "cluster.sh: no cluster in $dir"; return 0; }
    dir=$(cd "$dir" && pwd)
    export SLURM_CONF="$dir/etc/slurm.conf"
    if [ -s "$dir/run/slurmctld.pid" ]; then
        timeout 10 scancel --partition=$partition >/dev/null 2>&1 || true
    fi
    local pidfile pids=()
    for pidfile in "$dir"/run/slurmd-*.pid "$dir/run/slurmctld.pid" \
                   "$dir/run/slurmdbd.pid" "$dir/run/mariadbd.pid" \
                   "$dir/run/munged.pid"; do
        [ -s "$pidfile" ] || continue
        pids+=("$(cat "$pidfile")")
    done
    pids+=($(pids_of_cluster "$dir"))
    [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null || true
    local t
    for t in $(seq 20); do
        local alive=()
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
        [ ${#alive[@]} -gt 0 ] || break
        sleep 0.5
    done
    # What ignored SIGTERM, and job processes orphaned by their slurmstepd.
    pids=("${pids[@]}" $(pids_of_cluster "$dir"))
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -f "$dir"/run/*.pid
    local marker
    for marker in "$dir"/run/slow-* "$dir"/run/memory-*; do
        if [ -e "$marker" ]; then
            local name=${marker##*/}
            (release "$dir" "${name#*-}" "${name%%-*}") || true
        fi
    done
    echo "Slurm cluster in $dir stopped"
}

status() {
    local dir=${1:?usage: cluster.sh status DIR}
    [ -d "$dir" ] || return 0
    dir=$(cd "$dir" && pwd)
    local pidfile pids=()
    for pidfile in "$dir"/run/*.pid; do
        [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null \
            && pids+=("$(cat "$pidfile")")
    done
    pids+=($(pids_of_cluster "$dir"))
    [ ${#pids[@]} -gt 0 ] || return 0
    ps -o pid=,args= -p "$(IFS=,; echo "${pids[*]}")"
    return 1
}

# The root of the cgroup hierarchy of CONTROLLER (cpu, memory): cgroup v1's
# hierarchy of that controller, else a cgroup v2 hierarchy that offers it;
# none: empty.
cgroup_root() {
    local controller=$1 v1 v2
    v1=$(awk -v c="$controller" '$3 == "cgroup" && $4 ~ "(^|,)" c "(,|$)" {print $2; exit}' /proc/mounts)
    if [ -n "$v1" ] && [ -w "$v1" ]; then echo "$v1"; return; fi
    v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
    if [ -n "$v2" ] && grep -qw "$controller" "$v2/cgroup.controllers" 2>/dev/null; then
        echo "$v2"
    fi
}

# A process and its descendants.
process_tree() {
    local child
    echo "$1"
    for child in $(pgrep -P "$1"); do process_tree "$child"; done
}

# node_group DIR NODE CONTROLLER: a new cgroup for NODE under CONTROLLER's
# root (its path printed), or die naming what the machine lacks.
node_group() {
    local dir=$1 node=$2 controller=$3 root
    root=$(cgroup_root "$controller")
    [ -n "$root" ] || die "no writable $controller cgroup (cgroup v1's $controller controller, or v2 offering it) on this machine"
    local group; group="$root/hpcml-$(echo "$dir" | md5sum | cut -c1-8)-$node"
    mkdir -p "$group"
    echo "$group"
}

# hold DIR NODE GROUP KIND: NODE's slurmd and its descendants (its jobs, now
# and later: they inherit the group) into GROUP, remembered in
# DIR/run/KIND-NODE for release.
hold() {
    local dir=$1 node=$2 group=$3 kind=$4 pid p
    pid=$(cat "$dir/run/slurmd-$node.pid" 2>/dev/null) \
        || die "no slurmd of node '$node' in $dir"
    kill -0 "$pid" 2>/dev/null || die "slurmd of $node (PID $pid) is not running"
    echo "$group" > "$dir/run/$kind-$node"
    for p in $(process_tree "$pid"); do
        echo "$p" > "$group/cgroup.procs" 2>/dev/null || true
    done
}

# release DIR NODE KIND: what hold put in its group back to the root group,
# the group removed.
release() {
    local dir=$1 node=$2 kind=$3
    local marker="$dir/run/$kind-$node"
    [ -s "$marker" ] || return 0
    local group; group=$(cat "$marker")
    local root=${group%/*} t p
    for t in $(seq 20); do
        [ -d "$group" ] || break
        for p in $(cat "$group/cgroup.procs" 2>/dev/null); do
            echo "$p" > "$root/cgroup.procs" 2>/dev/null || true
        done
        rmdir "$group" 2>/dev/null && break
        sleep 0.1
    done
    [ ! -d "$group" ] || die "cannot remove $group: $(cat "$group/cgroup.procs" | wc -l) processes left"
    rm -f "$marker"
}

# slow DIR NODE [PERCENT]: NODE's slurmd and its jobs held to PERCENT % of
# one core by a CFS bandwidth quota.
slow() {
    need_root
    local dir=${1:?usage: cluster.sh slow DIR NODE [PERCENT]}
    local node=${2:?usage: cluster.sh slow DIR NODE [PERCENT]}
    local percent=${3:-20} period=10000
    dir=$(cd "$dir" && pwd)
    [[ "$percent" =~ ^[0-9]+$ ]] && [ "$percent" -ge 1 ] && [ "$percent" -le 100 ] \
        || die "PERCENT must be 1..100, not '$percent'"
    local group; group=$(node_group "$dir" "$node" cpu)
    local quota=$((percent * period / 100))
    if [ -e "$group/cpu.max" ]; then
        echo "$quota $period" > "$group/cpu.max"
    else
        echo "$period" > "$group/cpu.cfs_period_us"
        echo "$quota" > "$group/cpu.cfs_quota_us"
    fi
    hold "$dir" "$node" "$group" slow
    echo "node $node held to $percent % of one core ($group)"
}

# unslow DIR NODE: the quota lifted.
unslow() {
    local dir=${1:?usage: cluster.sh unslow DIR NODE}
    local node=${2:?usage: cluster.sh unslow DIR NODE}
    dir=$(cd "$dir" && pwd)
    release "$dir" "$node" slow
    echo "node $node no longer slowed"
}

# limit_memory DIR NODE MIB: NODE's slurmd and its jobs limited to MIB MiB
# of memory together, no swap: the kernel's out-of-memory killer ends the
# largest process past it (a job asking more than its node's memory).
limit_memory() {
    need_root
    local usage='usage: cluster.sh limit-memory DIR NODE MIB'
    local dir=${1:?$usage} node=${2:?$usage} mib=${3:?$usage}
    dir=$(cd "$dir" && pwd)
    [[ "$mib" =~ ^[0-9]+$ ]] && [ "$mib" -ge 16 ] || die "MIB must be an integer >= 16, not '$mib'"
    local group; group=$(node_group "$dir" "$node" memory)
    local bytes=$((mib * 1024 * 1024))
    if [ -e "$group/memory.max" ]; then
        echo "$bytes" > "$group/memory.max"
        [ ! -e "$group/memory.swap.max" ] || echo 0 > "$group/memory.swap.max"
    else
        echo "$bytes" > "$group/memory.limit_in_bytes"
        [ ! -e "$group/memory.memsw.limit_in_bytes" ] \
            || echo "$bytes" > "$group/memory.memsw.limit_in_bytes"
    fi
    hold "$dir" "$node" "$group" memory
    echo "node $node limited to $mib MiB of memory ($group)"
}

# unlimit_memory DIR NODE: the limit lifted.
unlimit_memory() {
    local dir=${1:?usage: cluster.sh unlimit-memory DIR NODE}
    local node=${2:?usage: cluster.sh unlimit-memory DIR NODE}
    dir=$(cd "$dir" && pwd)
    release "$dir" "$node" memory
    echo "node $node no longer memory-limited"
}

# node_exec DIR NODE COMMAND...: COMMAND in NODE's mount and UTS namespaces
# (what the node's jobs see: a file system mounted there is node-local).
node_exec() {
    local usage='usage: cluster.sh node-exec DIR NODE COMMAND...'
    local dir=${1:?$usage} node=${2:?$usage}; shift 2
    [ $# -gt 0 ] || die "$usage"
    local pid; pid=$(cat "$dir/run/slurmd-$node.pid" 2>/dev/null) \
        || die "no slurmd of node '$node' in $dir"
    nsenter --target "$pid" --mount --uts -- "$@"
}

case "${1:-}" in
    install) shift; install "$@" ;;
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    status) shift; status "$@" ;;
    slow) shift; slow "$@" ;;
    unslow) shift; unslow "$@" ;;
    limit-memory) shift; limit_memory "$@" ;;
    node-exec) shift; node_exec "$@" ;;
    unlimit-memory) shift; unlimit_memory "$@" ;;
    env) cat "${2:?usage: cluster.sh env DIR}/env.sh" ;;
    exec)
        dir=$(cd "${2:?usage: cluster.sh exec DIR COMMAND...}" && pwd); shift 2
        . "$dir/env.sh"
        with_cluster_hosts "$dir" '' "$@" ;;
    *) sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
