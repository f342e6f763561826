#!/bin/sh
# Print the address at which the other nodes of a job reach NODE (a Slurm
# node name or a host name), as the site config says (partition extras
# 'rendezvous_address', exported by the job as HPCML_RENDEZVOUS_ADDRESS):
#   {hostname}i   a template: NODE in place of {hostname} (JUWELS' InfiniBand
#                 names: jwb0001 -> jwb0001i); the default is {hostname}
#   nodeaddr      the node's NodeAddr in Slurm: from HPCML_NODE_ADDRESSES
#                 ("n1=10.0.0.1 n2=10.0.0.2 ...", which the job script sets
#                 once, so that tasks need no scontrol, e.g. in a container),
#                 else from scontrol
#   127.0.0.1     a fixed address
#
#   node_address.sh --job-map NODELIST   print HPCML_NODE_ADDRESSES for the
#                                        nodes of NODELIST (one scontrol call)
set -eu
if [ "$1" = --job-map ]; then
    scontrol -o show node "$2" | tr ' ' '\n' | awk -F= '
        $1 == "NodeName" { name = $2 }
        $1 == "NodeAddr" { printf "%s=%s ", name, $2 }'
    exit 0
fi
node="$1"
spec="${HPCML_RENDEZVOUS_ADDRESS:-}"
[ -n "$spec" ] || spec='{hostname}'
case "$spec" in
    nodeaddr)
        for pair in ${HPCML_NODE_ADDRESSES:-}; do
            case "$pair" in
                "$node="*) echo "${pair#*=}"; exit 0 ;;
            esac
        done
        addr=$(scontrol show node "$node" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
        if [ -z "$addr" ]; then
            echo "node_address.sh: no NodeAddr for node '$node' in scontrol" >&2
            exit 1
        fi
        echo "$addr" ;;
    *)
        printf '%s\n' "$spec" | sed "s/{hostname}/$node/g" ;;
esac
