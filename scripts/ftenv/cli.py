"""The `ftenv` command: one subcommand per module, each module adds its own parser."""

from __future__ import annotations

import argparse
import importlib
import sys

from ftenv import __version__

#: Modules (dotted, below ftenv) that provide `add_parser(subparsers)`; the order is the help's order.
COMMANDS = [
    "report.render",
    "build.versions_cli",
    "build.buildcheck",
    "train.finetune",
    "steps.watch",
    "steps.analyze",
    "train.selfcheck",
    "report.shape_probe",
    "train.tinymodel",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ftenv",
        description="Tools of the Fun-ASR-Nano GPU images: report, checks, watchdog.",
    )
    parser.add_argument("--version", action="version", version=f"ftenv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"ftenv.{name}").add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
