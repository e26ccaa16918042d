"""`python -m imagetools COMMAND`: host-side tooling (not in the image); each module adds its parser."""

from __future__ import annotations

import argparse
import importlib
import sys

#: Modules under imagetools/ that provide `add_parser(subparsers)`; the order is the help's order.
COMMANDS = ["release", "locks", "layers", "scan", "local", "emulated", "engine", "gpukit"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m imagetools", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"imagetools.{name}").add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
