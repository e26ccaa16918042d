"""The `ftenv` command: each subcommand lives in the module of its name, which adds its own parser."""

from __future__ import annotations

import argparse
import sys

from ftenv import __version__
from ftenv.report import probe, report
from ftenv.selfcheck import selfcheck, tinymodel
from ftenv.stack import buildcheck, versions
from ftenv.steps import analyze, watch
from ftenv.train import finetune

#: The subcommands' modules, in the help's order.
COMMANDS = (report, versions, buildcheck, finetune, watch, analyze, selfcheck, probe, tinymodel)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ftenv",
        description="Tools of the Fun-ASR-Nano GPU images: report, checks, watchdog.",
    )
    parser.add_argument("--version", action="version", version=f"ftenv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
