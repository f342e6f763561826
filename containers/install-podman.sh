#!/usr/bin/env bash
# Podman for the suite's image (make image, the *Container checks), on
# Debian or Ubuntu:
#
#   containers/install-podman.sh
#
# As root: apt-get podman, runc (see containers/podman/hpcml.conf for why
# runc) and debootstrap (the base image where no registry is reachable),
# then the containers.conf drop-in into /etc/containers/containers.conf.d/.
# As a user (Podman installed by the site): the drop-in into
# ~/.config/containers/containers.conf.d/ only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ "$(id -u)" = 0 ]; then
    missing=()
    for tool in podman runc debootstrap; do
        command -v "$tool" >/dev/null || missing+=("$tool")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq "${missing[@]}" >/dev/null \
            || { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
    fi
    conf_dir=/etc/containers/containers.conf.d
else
    command -v podman >/dev/null || {
        echo "install-podman.sh: podman is not installed; as root this script" \
             "installs it (apt-get install podman runc debootstrap)" >&2
        exit 1
    }
    conf_dir=${XDG_CONFIG_HOME:-$HOME/.config}/containers/containers.conf.d
fi
mkdir -p "$conf_dir"
install -m 0644 "$here/podman/hpcml.conf" "$conf_dir/hpcml.conf"
echo "podman $(podman --version | awk '{print $3}'), runtime" \
     "$(podman info --format '{{.Host.OCIRuntime.Name}}'), settings in $conf_dir/hpcml.conf"
