"""The options several commands share (`ftenv watch` and `ftenv analyze`; `ftenv eval` and `ftenv
transcribe`): one home, so their parsers read them alike."""

from __future__ import annotations

import argparse

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
