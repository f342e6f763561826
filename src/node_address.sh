#!/bin/sh
# Print the address at which the other nodes of a job reach NODE (a Slurm
# node name or a host name), as the site config says (partition extras
# 'rendezvous_address', exported by the job as HPCML_RENDEZVOUS_ADDRESS):
#   {hostname}i   a template: NODE in place of {hostname} (JUWELS' InfiniBand
#                 names: jwb0001 -> jwb0001i); the default is {hostname}
#   nodeaddr      the node's NodeAddr in Slurm
#   127.0.0.1     a fixed address
set -eu
node="$1"
spec="${HPCML_RENDEZVOUS_ADDRESS:-}"
[ -n "$spec" ] || spec='{hostname}'
case "$spec" in
    nodeaddr)
        addr=$(scontrol show node "$node" | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
        if [ -z "$addr" ]; then
            echo "node_address.sh: no NodeAddr for node '$node' in scontrol" >&2
            exit 1
        fi
        echo "$addr" ;;
    *)
        printf '%s\n' "$spec" | sed "s/{hostname}/$node/g" ;;
esac
