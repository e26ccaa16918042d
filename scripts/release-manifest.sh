#!/usr/bin/env bash
# Usage: scripts/release-manifest.sh IMAGE@DIGEST PLATFORM   (markdown on stdout)
#
# The package manifest of one platform of a pushed image, as docker-stacks attaches to its images:
# its labels, `pip freeze --all` (written at build time to /opt/ftenv/pip-freeze.txt) and the OS
# packages (dpkg), read by running the image. Another platform runs under QEMU (binfmt).
set -euo pipefail
image=$1 platform=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

docker pull --quiet --platform "$platform" "$image" >/dev/null
run() { docker run --rm --platform "$platform" --entrypoint "$1" "$image" "${@:2}"; }
run cat /opt/ftenv/pip-freeze.txt >"$tmp/pip.txt"
# shellcheck disable=SC2016  # dpkg-query's own format fields, not shell variables
run dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n' >"$tmp/dpkg.txt"
docker image inspect --format '{{json .Config.Labels}}' "$image" >"$tmp/labels.json"
PYTHONPATH=$here python3 -m imagetools release manifest --image "$image" --platform "$platform" \
  --pip "$tmp/pip.txt" --dpkg "$tmp/dpkg.txt" --labels "$tmp/labels.json"
docker image rm "$image" >/dev/null 2>&1 || true
