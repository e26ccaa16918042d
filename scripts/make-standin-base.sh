#!/usr/bin/env bash
# Make a local stand-in for the Dockerfile's base image where no registry is reachable:
# a Debian minbase root filesystem imported into podman under the exact name FROM uses,
# so the Dockerfile builds unchanged with --pull=never. Debian's Python is 3.11 where
# Ubuntu 24.04 has 3.12; the locks cover both (docker/locks/README.md).
set -euo pipefail
name=${1:?usage: make-standin-base.sh IMAGE_NAME}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if podman image exists "$name"; then
    echo "stand-in base $name exists"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
tar -C "$work/rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$name"
echo "stand-in base $name imported"
