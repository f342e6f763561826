#!/bin/sh
# The suite's image recipe, run inside the image being built by both front
# ends: containers/Containerfile (Podman, Docker) and containers/hpcml.def
# (Apptainer). `hpcml image` (make image) makes the build context it reads:
#
#   BUILD/requirements.txt   the pins of pyproject.toml's extras, as they are
#   BUILD/wheelhouse/        every wheel they resolve to, downloaded on the
#                            host with the host's pip configuration (its
#                            local indexes included): nothing is fetched here
#
# The programs are not copied in: jobs bind-mount the repository at its own
# path and run them with PYTHONPATH=src, so the image changes only when a
# pin does. Usage: setup.sh [BUILD]   (default /build)
set -eu
build=${1:-/build}
prefix=/opt/hpcml

python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
    echo "containers/setup.sh: the base image's python3 is older than 3.10" \
         "(the suite's pins need 3.10 or later): choose another --base" >&2
    exit 1
}
python3 -m venv "$prefix" || {
    echo "containers/setup.sh: python3 -m venv failed: the base image needs" \
         "Python's venv module (Debian and Ubuntu: python3-venv)" >&2
    exit 1
}
# Only the wheelhouse: a base's own pip settings (NGC sets PIP_CONSTRAINT to
# its whole image's versions) must not hold the pins back.
PIP_CONSTRAINT= PIP_CONFIG_FILE=/dev/null "$prefix/bin/python" -m pip install \
    --no-cache-dir --no-index --disable-pip-version-check \
    --find-links "$build/wheelhouse" -r "$build/requirements.txt"

# Every module each pinned distribution installs, imported once here: a
# wheel that cannot load in this base (a missing system library) stops the
# build, not the first job. Prints each distribution's version.
"$prefix/bin/python" - "$build/requirements.txt" <<'PY'
import importlib, re, sys
from importlib import metadata
tops = metadata.packages_distributions()
for line in open(sys.argv[1]):
    match = re.match(r'\s*([A-Za-z0-9_.-]+)', line)
    if not match:
        continue
    dist = metadata.metadata(match.group(1))['Name']
    modules = sorted(m for m, names in tops.items() if dist in names)
    for module in modules:
        importlib.import_module(module)
    print(f'{dist} {metadata.version(dist)}: {" ".join(modules)}')
PY
