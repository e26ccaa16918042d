"""The entry of `ftenv watch`, and so of every launcher (`ftenv finetune` execs it): check what was
asked (ftenv.watchdog.watch_command), then run the command under the watchdog, or, with the watchdog
turned off (FTENV_WATCH=0), become the command itself, so that turning it off leaves nothing of
ftenv between the launcher and the trainer. Here the watchdog's parts meet: the slow-step lines,
the silence clock and the pipes, for the command's life (ftenv.watchdog.process_life).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from ftenv import outcome
from ftenv.attention.process_settings import AttentionSettings, read_process_settings
from ftenv.watchdog.pipes import PumpState
from ftenv.watchdog.process_life import cannot_start, watch_process
from ftenv.watchdog.silence import Silence
from ftenv.watchdog.slow_step_lines import SlowStepLines
from ftenv.watchdog.watch_command import WatchOptions, checked


def run(options: WatchOptions) -> int:
    """`ftenv watch`: the command's exit code (see watch()), or the refusal's."""
    answer = checked(options)
    if isinstance(answer, int):
        return answer
    options, watch_on = answer
    if not watch_on:
        return _become(options.argv)
    code = watch(options)
    # The command is gone and its code decided: a late signal (Slurm ends the other nodes' tasks
    # when one exits first) must not turn this process's exit into 128+N while it shuts down.
    if threading.current_thread() is threading.main_thread():
        for sig in outcome.FORWARDED:
            signal.signal(sig, signal.SIG_IGN)
    return code


def watch(options: WatchOptions, settings: Callable[[], AttentionSettings | None] | None = None) -> int:
    """Run options.argv under the watchdog; its exit code (ftenv.watchdog.process_life.watch_process).
    settings: a callable returning AttentionSettings (tests); default reads the training
    process's settings from outside it (ftenv.attention.process_settings)."""

    def new_state(pid: int) -> PumpState:
        slow_lines = SlowStepLines(
            factor=options.factor,
            warmup=options.warmup,
            repeat=options.repeat,
            settings=settings or (lambda: read_process_settings(pid)),
            time_holds_pause=options.time == "total",
        )
        return PumpState(slow_lines, options.summary_every, options.time, Silence(options.silence))

    return watch_process(options, new_state)


def _become(argv: list[str]) -> int:
    """exec argv: this process becomes the command; returns only if exec fails."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        return cannot_start(argv, exc)
