"""The watched command's life: start it in its own process group, pass signals on to that group,
wait for it under the silence clock, drain its pipes, and close with the lines and the exit code
that say how it ended. The pipes themselves are ftenv.watchdog.pipes'.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ftenv import outcome, variables
from ftenv.watchdog import crash, hang
from ftenv.watchdog.line_mark import PREFIX
from ftenv.watchdog.pipes import Pump, PumpState, place_lines
from ftenv.watchdog.thresholds import HANG_KILL_AFTER_S
from ftenv.watchdog.watch_command import PROG, WatchOptions

#: How much later a step line printed before a traceback (in the other pipe) may be read.
READ_SLACK_S = 1.0
#: After the command exits, how long its pipes may stay quiet before the watchdog stops draining
#: them (a leftover grandchild may hold them open).
DRAIN_S = 3.0


def cannot_start(argv: list[str], exc: OSError) -> int:
    """Say why the command did not start and return the shell's code for it (127 not found, 126
    not runnable), as `sh -c` would."""
    if isinstance(exc, FileNotFoundError):
        print(f"{PROG}: command not found: {argv[0]}", file=sys.stderr)
        return outcome.NOT_FOUND
    if isinstance(exc, PermissionError):
        print(f"{PROG}: permission denied: {argv[0]}", file=sys.stderr)
        return outcome.NOT_RUNNABLE
    print(f"{PROG}: cannot run {shlex.join(argv)}: {exc}", file=sys.stderr)
    return outcome.NOT_RUNNABLE


def _wait(proc: subprocess.Popen, state: PumpState, say, root_folder: Path) -> tuple[int, bool]:
    """Wait for the command while watching the silence (ftenv.watchdog.silence): the alarm (with the
    stacks, ftenv.watchdog.hang) and, at the hard limit, the stop. Returns (exit status, hung)."""
    silence = state.silence
    if not silence.limits.on:
        return proc.wait(), False
    poll = min(1.0, max(0.05, silence.limits.min_s / 4))
    stacks_line = None
    while True:
        try:
            return proc.wait(timeout=poll), False
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        with state.lock:
            due = silence.due(now)
        if due == "alarm":
            stacks = stacks_line = hang.dump_stacks(proc.pid, root_folder, silence.silence(now))
            with state.lock:
                say([silence.alarm_line(time.monotonic(), stacks)])
        elif due == "hang":
            with state.lock:
                say([silence.hang_line(now, HANG_KILL_AFTER_S)])
            rc = hang.stop_command(proc, HANG_KILL_AFTER_S)
            state.hung_note = hang.write_hung_record(root_folder, silence.silence(now), stacks_line)
            return rc, True


def watch_process(options: WatchOptions, new_state: Callable[[int], PumpState]) -> int:
    """Run options.argv under the watchdog; returns its exit code (128+N when signal N ended it; HUNG
    when the silence alarm's hard limit stopped it; FAIL when it finished on data FunASR lost).
    new_state: the pumps' state for the started command's pid (its slow-step lines read that
    process's settings)."""
    argv = options.argv
    folder = options.output_dir or Path.cwd()  # checked() decides it for `ftenv watch`
    env = variables.environment(hang.command_env(folder))  # the trainer entry lets us read its stacks
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0, env=env
        )
    except OSError as exc:
        return cannot_start(argv, exc)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in outcome.FORWARDED:
            previous[sig] = signal.signal(sig, forward)
    state = new_state(proc.pid)
    slow_lines = state.slow_lines
    out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    sys.stdout.flush()
    sys.stderr.flush()
    hint_fd = err_fd if options.hint_stream == "stderr" else None
    pumps = [Pump(proc.stdout, out_fd, state, hint_fd), Pump(proc.stderr, err_fd, state, hint_fd)]
    for p in pumps:
        p.start()

    def say(lines: list[str]) -> None:
        place_lines(lines, pumps, hint_fd or state.last_step_fd or err_fd, out_fd, err_fd)

    try:
        rc, hung = _wait(proc, state, say, folder)
        exited = time.monotonic()
        # The command is gone; its output may still be in the pipes (or a leftover grandchild may
        # hold them open): drain until EOF, or until nothing came for DRAIN_S seconds after the exit.
        for p in pumps:
            while p.is_alive():
                p.join(timeout=0.1)
                if p.is_alive() and time.monotonic() - max(p.last_data, exited) > DRAIN_S:
                    break
        code = outcome.HUNG if hung else (128 - rc if rc < 0 else rc)
        with state.lock:  # a pump still draining a leftover's output may be counting
            data_failed = code == 0 and state.data.failed()  # the command's code, unless FunASR lost data
            lines = _closing_lines(state, pumps, code, hung, folder) if code else []
            if options.summary and (
                slow_lines.n_steps
                or slow_lines.val_lines
                or slow_lines.bad_lines
                or state.broken
                or data_failed
            ):
                lines += _summary_lines(state, code, data_failed)
        if lines:
            say(lines)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return outcome.EXIT[outcome.FAIL] if data_failed else code


def _summary_lines(state: PumpState, code: int, data_failed: bool) -> list[str]:
    """The closing summary: the verdict on the steps, FunASR's lost data, the lines not judged."""
    slow_lines = state.slow_lines
    label = crash.verdict_label(stopped=code == outcome.STOPPED, failed=code != 0)
    lines = slow_lines.summary_lines(final=True, verdict_label=label)
    lines += state.data.summary_lines(PREFIX)
    if data_failed:
        lines.append(
            f"{PREFIX} exit {outcome.EXIT[outcome.FAIL]}: the training ran, but on data FunASR "
            "silently lost (above)"
        )
    if slow_lines.bad_lines:
        lines.append(
            f"{PREFIX} {slow_lines.bad_lines} lines began like a training step but had no rank "
            f"or no usable time (passed through, not judged), e.g. {slow_lines.bad_example}"
        )
    if state.broken:
        lines.append(f"{PREFIX} note: {state.broken}")
    return lines


def _closing_lines(state: PumpState, pumps: list[Pump], code: int, hung: bool, folder: Path) -> list[str]:
    """The first closing line when the command did not finish: stopped and saved (exit STOPPED), or
    how it failed (its exit code, or the hang's stop), after which step, and the exception it ended
    with."""
    slow_lines = state.slow_lines
    last_step = slow_lines.steps[-1][0] if slow_lines.steps else None
    if code == outcome.STOPPED and not hung:
        return [crash.stopped_line(state.stop, last_step, str(folder), prefix=PREFIX)]
    # stderr first: where Python and torchrun write an uncaught exception.
    crashes = (
        p.tracebacks.crash(slow_lines.n_steps, state.last_step_at, READ_SLACK_S) for p in reversed(pumps)
    )
    error = next((e for e in crashes if e), None)
    if hung:
        how = (
            f"the training command was STOPPED (no trainer line for the hard limit, a hang; exit code {code})"
        )
        return [
            crash.failure_line(None, error, last_step, how=how, prefix=PREFIX),
            f"{PREFIX} {state.hung_note}",
        ]
    return [crash.failure_line(code, error, last_step, prefix=PREFIX)]
