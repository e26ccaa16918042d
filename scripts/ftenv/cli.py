"""The `ftenv` command: one parser assembled from the commands (ftenv.commands), and one rule for a
bug in any of them: exit 4, never a verdict's 0 or 1."""

from __future__ import annotations

import argparse
import sys
import traceback

from ftenv import __version__, outcome, variables
from ftenv.commands import (
    analyze,
    buildcheck,
    data,
    eval,
    export,
    finetune,
    probe,
    report,
    selfcheck,
    tinymodel,
    transcribe,
    versions,
    watch,
)

#: The subcommands' modules, in the help's order.
COMMANDS = (
    report,
    versions,
    buildcheck,
    data,
    finetune,
    eval,
    transcribe,
    export,
    watch,
    analyze,
    selfcheck,
    probe,
    tinymodel,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ftenv",
        description="Tools of the Fun-ASR-Nano GPU images: report, checks, watchdog.",
    )
    parser.add_argument("--version", action="version", version=f"ftenv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    args = parser.parse_args(eval.with_default_action(sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except Exception as exc:  # a bug in ftenv: never exit 0 or 1, which are verdicts
        if variables.read(variables.DEBUG) == "1":
            traceback.print_exc()
        print(
            f"ftenv {args.command}: internal error (a bug in ftenv, not a verdict): {type(exc).__name__}: "
            f"{exc}; {variables.DEBUG}=1 prints the traceback; exit {outcome.INTERNAL_ERROR}",
            file=sys.stderr,
        )
        return outcome.INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
