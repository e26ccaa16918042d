"""`python -m imagetools COMMAND`: host-side tooling (not in the image); each module adds its parser.

Only the named command's module is imported: `make run` calls `engine` and `local` with a host's
stock python3, which lacks what other commands need from the venv (packaging, PyYAML).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ftenv import outcome

#: Each command and the module under imagetools/ that provides its `add_parser(subparsers)`; the
#: order is the help's order.
COMMANDS = {
    "release": "release.command",
    "locks": "locks",
    "wheelfacts": "release.wheelfacts",
    "layers": "local.layers",
    "scan": "release.scan",
    "local": "local.build_and_run",
    "emulated": "local.emulated",
    "engine": "local.engine",
    "gpukit": "gpukit.command",
    "released-layout": "fixture.released",
}


def _add_unavailable(sub, name: str, missing: str) -> None:
    """A command whose module needs what this Python lacks: listed, and refused with the fix."""

    def refuse(_args: argparse.Namespace) -> int:
        print(
            f"imagetools {name}: this Python lacks {missing}: run it from the venv (`make venv`)",
            file=sys.stderr,
        )
        return outcome.UNUSABLE

    p = sub.add_parser(name, help=f"(needs {missing}: run it from the venv)", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=refuse)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m imagetools", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = [argv[0]] if argv[:1] and argv[0] in COMMANDS else COMMANDS
    for name in named:
        try:
            module = importlib.import_module(f"imagetools.{COMMANDS[name]}")
        except ModuleNotFoundError as exc:
            if not exc.name or exc.name.split(".")[0] in ("imagetools", "ftenv"):
                raise  # a bug of ours, not a missing package
            _add_unavailable(sub, name, exc.name)
            continue
        module.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
