"""`ftenv versions`: its parser. The arguments live with ftenv.stack.versions, whose own command line
(`python -m ftenv.stack.versions`, the Makefile's, on the host's stock python3) takes the same."""

from __future__ import annotations

import argparse

from ftenv.stack import versions


def add_parser(sub) -> None:
    p = sub.add_parser("versions", help=versions.DESCRIPTION)
    versions.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return versions.run(versions.query_of(args))
