"""The exception a failed training command ended with, read from its log, so that no step-time
verdict stands alone under a crash. The first traceback after the last step line is the cause;
what follows it is consequence. Standard library only.
"""

from __future__ import annotations

import re
import signal
import time

from ftenv import outcome

TRACEBACK = b"Traceback (most recent call last):"
#: torchrun's `[rank3]: ` (or `[default0]:`) prefix on a worker's lines.
_RANK_PREFIX = re.compile(rb"^\[[A-Za-z]*\d+\]:\s?")
_EXCEPTION = re.compile(rb"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Failure|Warning)?\b.*")
_CHAIN = (b"During handling of the above exception", b"The above exception was the direct cause")
#: The step-time verdict's label when the command failed.
VERDICT_LABEL = "step-time verdict on the steps before the failure"
#: ... and when it stopped on a signal with everything saved (outcome.STOPPED): not a failure.
STOP_VERDICT_LABEL = "step-time verdict on the steps before the stop"
#: Cheap test before matching outcome.STOP_LINE.
_STOP_MARK = b"stopped on "


def read_stop(line: bytes) -> dict | None:
    """The fields of a stop line (outcome.stop_line: signal, epoch, step, file), or None. Cheap on
    any other line (one bytes search), so that the watchdog may ask it of every line it passes."""
    if _STOP_MARK not in line:
        return None
    m = outcome.STOP_LINE.search(line.decode("utf-8", "replace"))
    return m.groupdict() if m else None


def _strip(line: bytes) -> bytes:
    return _RANK_PREFIX.sub(b"", line.rstrip(b"\r"), count=1)


class Tracebacks:
    """Fed the lines that may belong to a traceback; keeps the exception line of the first
    traceback after the latest step (`steps`: how many step lines had come when it was seen). In
    a chained traceback (`During handling of the above exception...`) the exception that was
    raised last is the one kept: Python prints it last."""

    __slots__ = ("_chained", "_kept_last", "_steps", "active", "error", "error_at", "error_steps")

    def __init__(self) -> None:
        self.error: str | None = None
        self.error_steps = -1
        self.error_at = 0.0  # time.monotonic() when it was read
        self.active = False
        self._steps = 0
        self._chained = False  # a chain marker since the last exception line
        self._kept_last = False  # the last exception line seen is the one kept

    @property
    def open(self) -> bool:
        """Inside a traceback, or right after the exception kept (a chain may follow)."""
        return self.active or self._kept_last

    def wants(self, line: bytes) -> bool:
        """Cheap test for the hot path: is this line worth feed()?"""
        return self.open or TRACEBACK in line

    def feed(self, line: bytes, steps: int) -> None:
        body = _strip(line)
        if TRACEBACK in body:
            self.active, self._steps = True, steps
            return
        if body.startswith(_CHAIN):
            self._chained = True
            return
        if not self.active:
            if body.strip():  # any other line: no chain follows the exception kept
                self._kept_last = self._chained = False
            return
        if not body.strip() or body[:1] in (b" ", b"\t"):
            return  # a frame, its source line, or a blank line
        self.active = False
        if not _EXCEPTION.match(body):
            self._kept_last = self._chained = False
            return
        text = body[:300].decode("utf-8", "replace")
        if self._chained and self._kept_last:
            self.error = text  # the chain's later exception replaces the one it was raised from
        elif self.error is None or self._steps > self.error_steps:
            self.error, self.error_steps, self._kept_last = text, self._steps, True
            self.error_at = time.monotonic()
        else:
            self._kept_last = False
        self._chained = False

    def crash(self, steps: int, last_step_at: float | None = None, slack_s: float = 0.0) -> str | None:
        """The exception line the run ended with: one seen after the last of `steps` step lines.
        Live, step lines and tracebacks come through two pipes read by two threads, so a step
        line printed before the traceback may be read just after it: with last_step_at (when the
        last step line was read), one read less than slack_s before that still counts."""
        if self.error is None:
            return None
        if self.error_steps >= steps or (
            last_step_at is not None and last_step_at <= self.error_at + slack_s
        ):
            return self.error
        return None


def verdict_label(stopped: bool, failed: bool) -> str:
    """What the step-time verdict's line is called, live and offline alike: after a saved stop or a
    failure it is about the steps before it, never a bare `verdict` under a crash."""
    return STOP_VERDICT_LABEL if stopped else VERDICT_LABEL if failed else "verdict"


def exit_text(code: int) -> str:
    """'exit code 1', or 'killed by SIGKILL (exit code 137)' for 128+N."""
    if code > 128:
        try:
            return f"killed by {signal.Signals(code - 128).name} (exit code {code})"
        except ValueError:
            pass
    return f"exit code {code}"


def failure_line(
    code: int | None, error: str | None, last_step: int | None, how: str | None = None, prefix: str = ""
) -> str:
    """The closing block's first line when the training command failed: how (its exit code; code
    None: a saved log that ends in a traceback), after which step, the exception it ended with;
    prefix: the watchdog's mark."""
    if how is None:
        how = f"the training command FAILED ({exit_text(code)})" if code is not None else "the run FAILED"
    error_text = f"last error: {error}" if error else "no Python exception in its output"
    return f"{prefix} {how} {_where(last_step)}; {error_text}".lstrip()


def stopped_line(
    stop: dict | None, last_step: int | None, folder: str | None = None, prefix: str = ""
) -> str:
    """The closing block's first line when the run stopped on a signal with everything saved (exit
    outcome.STOPPED): where it was saved and how to go on, from the stop line the run printed (stop)
    or, without one (rank 0 ran on another node), the output folder; never a failure."""
    if stop is not None:
        saved = f"stopped on {stop['signal']} at epoch {stop['epoch']} step {stop['step']}, "
        saved += f"saved to {stop['file']}"
    else:
        saved = f"rank 0 saved where the run was in its output folder{f' ({folder})' if folder else ''}"
    return (
        f"{prefix} the training command STOPPED on a signal and SAVED (exit code {outcome.STOPPED}, "
        f"not a failure) {_where(last_step)}: {saved}; run the same command again to continue "
        "(the examples' schedulers requeue or retry it)"
    ).lstrip()


def _where(last_step: int | None) -> str:
    return f"after step {last_step}" if last_step is not None else "before its first step"
