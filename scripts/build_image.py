#!/usr/bin/env python3
"""Build one image variant with podman from versions.toml: `scripts/build_image.py [VARIANT]`.

For machines without a Docker daemon (these and CI's): the build args come from versions.toml,
the base image must exist locally (scripts/make-standin-base.sh makes a stand-in) and nothing is
pulled. Extra arguments after `--` go to `podman build` (e.g. `-- --build-arg=FUNASR_VERSION=0`).
With Docker and BuildKit, use docker/docker-bake.json instead (docs/releasing.md).
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from ftenv.build import versions  # noqa: E402


def git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def command(variant: versions.Variant, tags: list[str], extra: list[str]) -> list[str]:
    args = dict(variant.build_args())
    args["REVISION"] = git_revision()
    args["CREATED"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cmd = [
        "podman",
        "build",
        "--format=docker",
        "--pull=never",
        "--layers",
        "-f",
        str(ROOT / "docker/Dockerfile"),
    ]
    cmd += [f"--build-arg={k}={v}" for k, v in args.items()]
    for tag in [variant.image_ref, *tags]:
        cmd += ["-t", tag]
    return [*cmd, *extra, str(ROOT)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", nargs="?", help="variant from versions.toml (default: its default)")
    parser.add_argument("-t", "--tag", action="append", default=[], help="extra tag")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    extra = argv[split + 1 :]
    v = versions.load()
    variant = v.variant(args.variant) if args.variant else v.default
    cmd = command(variant, args.tag, extra)
    os.environ.setdefault("CONTAINERS_CONF", str(ROOT / "scripts/containers.conf"))
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
