"""`ftenv versions`: print what versions.toml derives, for the Makefile, the bake file and CI."""

from __future__ import annotations

import argparse
import json

from ftenv.build import versions


def run(args: argparse.Namespace) -> int:
    v = versions.load(args.file)
    variant = v.variant(args.variant or v.image["default_variant"])
    if args.what == "name":
        print(variant.name)
    elif args.what == "tag":
        print(variant.tag)
    elif args.what == "image":
        print(variant.image_ref)
    elif args.what == "variants":
        print("\n".join(v.variants))
    elif args.what == "requirements":
        print("\n".join(variant.requirements()))
    elif args.what == "build-args":
        # One `--build-arg K=V` per line, for `xargs` or `$(...)` in the Makefile.
        print("\n".join(f"--build-arg={k}={val}" for k, val in variant.build_args().items()))
    elif args.what == "json":
        print(
            json.dumps(
                {
                    "variant": variant.name,
                    "tag": variant.tag,
                    "image": variant.image_ref,
                    "build_args": variant.build_args(),
                    "labels": variant.labels(),
                },
                indent=2,
            )
        )
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("versions", help="values derived from versions.toml (tags, build args)")
    p.add_argument("what", choices=["name", "tag", "image", "variants", "requirements", "build-args", "json"])
    p.add_argument("variant", nargs="?", help="variant name (default: versions.toml's default)")
    p.add_argument("--file", help="versions file (default: the checkout's or the image's)")
    p.set_defaults(func=run)
