"""What `ftenv watch -- COMMAND [ARGS...]` was asked for (WatchOptions), and whether it can run:
a command given, the watchdog's settings in the environment understood. The environment is read
here only, once per run.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ftenv import outcome, variables
from ftenv.watchdog.silence import SilenceLimits
from ftenv.watchdog.thresholds import LIVE_WARMUP, REPEAT, SLOW_FACTOR

PROG = "ftenv watch"


@dataclass(frozen=True)
class WatchOptions:
    """What `ftenv watch` was asked for (ftenv.commands.watch); `cmd` may start with `--`.
    `silence`: the alarm's limits (checked() reads them from the environment); `output_dir`: where
    the watchdog's files go (`ftenv finetune` gives its plan's; checked() fills in the default)."""

    cmd: tuple[str, ...]
    factor: float = SLOW_FACTOR
    warmup: int = LIVE_WARMUP
    repeat: int = REPEAT
    summary: bool = True
    summary_every: int = 0
    hint_stream: str = "same"  # same or stderr
    time: str = "phases"  # phases or total
    output_dir: Path | None = None
    silence: SilenceLimits = field(default_factory=SilenceLimits)

    @property
    def argv(self) -> list[str]:
        argv = list(self.cmd)
        return argv[1:] if argv and argv[0] == "--" else argv


def output_folder(argv: list[str]) -> Path:
    """The default of `ftenv watch --output-dir` for a command of the user's: the trainer's output
    folder (FunASR's `++output_dir=` override, its last one), else the current directory."""
    for arg in reversed(argv):
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key == "output_dir" and value:
            return Path(value)
    return Path.cwd()


def checked(
    options: WatchOptions, environ: Mapping[str, str] | None = None
) -> tuple[WatchOptions, bool] | int:
    """(the options with the environment's silence limits, whether to watch: FTENV_WATCH=0 turns
    the watchdog off, the command still runs), or the exit code of a refusal after saying why."""
    if not options.argv:
        print(f"{PROG}: no command given; usage: {PROG} [OPTIONS] -- COMMAND [ARGS...]", file=sys.stderr)
        return outcome.UNUSABLE
    try:
        limits = SilenceLimits.from_env(environ)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return outcome.UNUSABLE
    folder = options.output_dir or output_folder(options.argv)
    watch_on = variables.read(variables.WATCH, environ) != "0"
    return replace(options, silence=limits, output_dir=folder), watch_on
