#!/usr/bin/env python3
"""Build one variant here: `scripts/build_image.py [VARIANT] [-t TAG] [--engine E] [--base B] [-- ARGS]`.

Docker when its daemon answers (`docker buildx bake` of docker/docker-bake.json with `--load`, or
without the buildx plugin the same target as one `docker build` with BuildKit), else podman; the
real base when it can be pulled, else a local stand-in (marked as such); the build args from
versions.toml. The image is tagged `localhost/ftenv:VARIANT` (plus --tag). ARGS go to the engine's
build command (e.g. `-- --build-arg=FUNASR_VERSION=0`). `--ca-bundle PEM` hands a proxy's CA bundle
to the pip steps as a build secret. The choices are made in scripts/imagetools/local/machine.py.
Callers that may build concurrently hold the build lock
(`flock /tmp/ftenv-build.lock`, as the Makefile does).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from imagetools.local import build_and_run, machine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", nargs="?", help="variant from versions.toml (default: its default)")
    parser.add_argument("-t", "--tag", action="append", default=[], help="extra tag (under localhost/)")
    parser.add_argument(
        "--engine", choices=machine.ENGINE_CHOICES, default="auto", help="auto: Docker if it answers"
    )
    parser.add_argument("--base", choices=machine.BASE_CHOICES, default="auto", help="auto: real if pullable")
    parser.add_argument(
        "--no-default-tag", action="store_true", help="tag only --tag, not the variant's local tag"
    )
    parser.add_argument(
        "--ca-bundle",
        metavar="PEM",
        help="CA bundle for pip behind a TLS-intercepting proxy (a build secret, never in the image)",
    )
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    variant = build_and_run.variant_named(args.variant)
    want = machine.Request(args.engine, args.base)
    ca_bundle = build_and_run.checked_ca_bundle(args.ca_bundle)
    return build_and_run.build(
        variant, args.tag, argv[split + 1 :], want, default_tag=not args.no_default_tag, ca_bundle=ca_bundle
    )


if __name__ == "__main__":
    sys.exit(main())
