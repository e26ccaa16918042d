"""The watchdog's entry for whoever launches a training command: run it under the watchdog, or,
with the watchdog turned off (FTENV_WATCH=0), become the command itself, so that turning it off
leaves nothing of ftenv between the launcher and the trainer.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from ftenv import outcome
from ftenv.steps.process_life import FORWARDED, PROG, WatchOptions, cannot_start, watch_process


def run_watched(options: WatchOptions, watch_on: bool = True) -> int:
    """Run options.argv under the watchdog, or, with watch_on False, exec it plainly (this process
    becomes the command; returns only if exec fails)."""
    argv = options.argv
    if not argv:
        print(f"{PROG}: no command given", file=sys.stderr)
        return outcome.UNUSABLE
    if not watch_on:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            return cannot_start(argv, exc)
    code = watch_process(options)
    # The command is gone and its code decided: a late signal (Slurm ends the other nodes' tasks
    # when one exits first) must not turn this process's exit into 128+N while it shuts down.
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_IGN)
    return code
