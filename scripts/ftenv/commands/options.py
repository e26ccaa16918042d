"""The options several commands share (`ftenv watch` and `ftenv analyze`; `ftenv eval` and `ftenv
transcribe`): one home, so their parsers read them alike; and how a parser's arguments become the
typed options a command's run takes."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from ftenv.evaluate import decode
from ftenv.watchdog.thresholds import SLOW_FACTOR


def factor_type(text: str) -> float:
    """argparse type: a slow factor, greater than 1."""
    value = float(text)
    if not value > 1:
        raise argparse.ArgumentTypeError("must be greater than 1")
    return value


def count_type(text: str) -> int:
    """argparse type: a count, 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def positive_type(text: str) -> int:
    """argparse type: 1 or more. The one rule for the decoders' --batch-size and --max-new-tokens
    (`ftenv eval`, `ftenv transcribe`): 0 or less is refused, exit 2, never clamped."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("give 1 or more")
    return value


def add_factor_option(p: argparse.ArgumentParser, against: str) -> None:
    p.add_argument(
        "--factor",
        "-k",
        type=factor_type,
        default=SLOW_FACTOR,
        help=f"slow = at least K x {against} ({SLOW_FACTOR:g})",
    )


def add_time_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--time",
        choices=("phases", "total"),
        default="phases",
        help="step time: data_load+forward+backward+optim (default; excludes validation and "
        "checkpoints done between steps) or FunASR's total_time",
    )


def add_decode_options(p: argparse.ArgumentParser, per_batch: str) -> None:
    """--batch-size, --device and --max-new-tokens of the commands that decode (eval, transcribe)."""
    p.add_argument(
        "--batch-size",
        type=positive_type,
        default=decode.BATCH_SIZE,
        metavar="N",
        help=f"{per_batch} per batch ({decode.BATCH_SIZE})",
    )
    p.add_argument("--device", metavar="cpu|cuda", help="where to decode (default: cuda when there is one)")
    p.add_argument(
        "--max-new-tokens",
        type=positive_type,
        default=decode.MAX_NEW_TOKENS,
        metavar="N",
        help=f"cap on each transcript's tokens (upstream's: {decode.MAX_NEW_TOKENS})",
    )


def from_options(options_type: type, run: Callable[[object], int]) -> Callable[[argparse.Namespace], int]:
    """The parser's func: the command's options from the parsed arguments, one per field of the
    same name (lists as tuples; a field no option sets keeps its default), handed to `run`; so that
    a new field is one `add_argument`."""

    def handle(args: argparse.Namespace) -> int:
        given = vars(args)
        values = {
            f.name: tuple(given[f.name]) if isinstance(given[f.name], list) else given[f.name]
            for f in dataclasses.fields(options_type)
            if f.name in given
        }
        return run(options_type(**values))

    return handle
