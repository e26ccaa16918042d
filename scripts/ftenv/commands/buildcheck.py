"""`ftenv buildcheck`: its parser (no options); the check is ftenv.stack.buildcheck's."""

from __future__ import annotations

import argparse

from ftenv.stack import buildcheck


def add_parser(sub) -> None:
    p = sub.add_parser("buildcheck", help="fail if the installed stack differs from versions.toml")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return buildcheck.run()
