"""`ftenv watch -- COMMAND [ARGS...]`: run a training command, pass its output through byte for
byte, and add one marked line when a step is several times the running median, saying why and
what to do. This module checks what it was asked and reads the watchdog's settings from the
environment (the one place the watchdog reads them); the work is ftenv.steps.launcher_entry's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import replace

from ftenv import outcome, variables
from ftenv.steps.launcher_entry import run_watched
from ftenv.steps.process_life import PROG, WatchOptions
from ftenv.steps.silence import SilenceLimits


def watch_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """FTENV_WATCH=0 turns the watchdog off (the command still runs)."""
    return environ.get(variables.WATCH, "1") != "0"


def run(options: WatchOptions) -> int:
    if not options.argv:
        print(f"{PROG}: no command given; usage: {PROG} [OPTIONS] -- COMMAND [ARGS...]", file=sys.stderr)
        return outcome.UNUSABLE
    try:
        limits = SilenceLimits.from_env(os.environ)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return outcome.UNUSABLE
    return run_watched(replace(options, silence=limits), watch_on=watch_enabled(os.environ))
