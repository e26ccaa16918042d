"""`ftenv watch`: its parser; the watchdog is ftenv.watchdog.watch's."""

from __future__ import annotations

import argparse
from pathlib import Path

from ftenv import variables
from ftenv.commands.options import add_factor_option, add_time_option, count_type
from ftenv.watchdog import watch
from ftenv.watchdog.line_mark import PREFIX
from ftenv.watchdog.thresholds import LIVE_WARMUP, REPEAT
from ftenv.watchdog.watch_command import PROG, WatchOptions


def add_parser(sub) -> None:
    p = sub.add_parser(
        "watch",
        help="run a training command and name slow steps, their cause and the fix, in its log",
        description=(
            "Runs COMMAND, passes its stdout and stderr through unchanged, and after a FunASR "
            "training step that takes at least K times the running median prints one line marked "
            f"{PREFIX} with the step's batch shape, the attention settings, the cause and the fix. "
            f"{variables.WATCH}=0 in the image's fine-tune entry turns it off. See docs/watchdog.md."
        ),
        usage=f"{PROG} [OPTIONS] -- COMMAND [ARGS...]",
    )
    add_factor_option(p, "the running median")
    p.add_argument(
        "--warmup",
        type=count_type,
        default=LIVE_WARMUP,
        help=f"steps per rank before any is judged ({LIVE_WARMUP})",
    )
    p.add_argument(
        "--repeat",
        type=count_type,
        default=REPEAT,
        help=f"slow steps of one cause printed before the pattern line ({REPEAT})",
    )
    p.add_argument(
        "--summary-every", type=count_type, default=0, metavar="N", help="also a summary every N steps"
    )
    p.add_argument("--no-summary", action="store_true", help="no summary at the end")
    p.add_argument(
        "--hint-stream",
        choices=("same", "stderr"),
        default="same",
        help="where the watchdog's lines go: right after the step line in its own stream (default) or stderr",
    )
    add_time_option(p)
    p.add_argument(
        "--output-dir",
        type=Path,
        help="where the stacks of a silent run go (default: the command's ++output_dir=, else here)",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = WatchOptions(
        cmd=tuple(args.cmd),
        factor=args.factor,
        warmup=args.warmup,
        repeat=args.repeat,
        summary=not args.no_summary,
        summary_every=args.summary_every,
        hint_stream=args.hint_stream,
        time=args.time,
        output_dir=args.output_dir,
    )
    return watch.run(options)
