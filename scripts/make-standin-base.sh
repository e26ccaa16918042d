#!/usr/bin/env bash
# Make the stand-in base for machines that cannot pull the real one (no registry): a Debian
# minbase root filesystem with Python, imported into ENGINE (podman or docker) under NAME.
# scripts/imagetools/local/machine.py picks the name, calls this only when the real base cannot be
# pulled, and passes the stand-in to the build as BASE_IMAGE. The name must be a local one
# (localhost/...): a stand-in under an upstream name would shadow the real image for every
# later build on this machine. Debian's Python is 3.11 where Ubuntu 24.04 has 3.12; the locks
# cover both (docker/locks/README.md). ARCH (a Debian architecture, e.g. arm64) makes the base
# for another CPU: debootstrap then runs that CPU's programs under qemu-user-static (registered
# with binfmt_misc; scripts/imagetools/local/emulated.py checks that first), and the image is marked
# with that architecture so that `podman build --platform` finds it.
set -euo pipefail
usage="usage: make-standin-base.sh ENGINE NAME [ARCH]"
engine=${1:?$usage}
name=${2:?$usage}
arch=${3:-}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

case $name in
    localhost/*) ;;
    *) echo "make-standin-base.sh: refusing $name: a stand-in lives under localhost/, never under a registry's name" >&2
       exit 2 ;;
esac
if "$engine" image inspect "$name" >/dev/null 2>&1; then
    echo "stand-in base $name exists"
    exit 0
fi
command -v debootstrap >/dev/null || {
    echo "make-standin-base.sh: debootstrap is missing (Debian/Ubuntu: apt-get install debootstrap, or \`make engine\` as root)" >&2
    exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
debootstrap ${arch:+--arch="$arch"} --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
marked=()
if [ -n "$arch" ]; then
    case $engine in
        podman) marked=(--arch "$arch") ;;
        *) marked=(--platform "linux/$arch") ;;
    esac
fi
tar -C "$work/rootfs" -c . | "$engine" import "${marked[@]}" --change 'CMD ["/bin/bash"]' - "$name"
echo "stand-in base $name imported"
