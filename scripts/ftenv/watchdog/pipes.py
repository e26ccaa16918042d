"""The watchdog's pipes: the command's stdout and stderr copied through byte for byte, each
complete line parsed on the side, and the watchdog's own lines inserted right after the step line
they are about (or placed where they cannot split one of the command's lines).

The two pumps share one state (PumpState) because the step lines, the silence clock and the
tracebacks of both streams make one account of the run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable

from ftenv.watchdog import crash, data_loss, funasr_log, nccl_net
from ftenv.watchdog.crash import TRACEBACK
from ftenv.watchdog.funasr_log import RECOMPILE_MARK
from ftenv.watchdog.line_mark import PREFIX
from ftenv.watchdog.silence import STEP, VAL_LINE, Silence

CHUNK = 1 << 16
#: Cheap test before parsing a line: both step-line tags contain it.
_TAG = b", rank: "
_DATA_MARK = data_loss.MARK.encode()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class PumpState:
    """The shared state of both pumps: parsing, the slow-step lines (a
    ftenv.watchdog.slow_step_lines.SlowStepLines, made by the caller), the silence clock, the
    tracebacks, and where hints go."""

    def __init__(self, slow_lines, summary_every: int, time_field: str, silence: Silence):
        self.slow_lines = slow_lines
        self.summary_every = summary_every
        self.time_field = time_field
        self.silence = silence
        self.lock = threading.Lock()
        self.last_step_fd: int | None = None
        self.last_step_at: float | None = None  # time.monotonic() when the last step line was read
        self.broken: str | None = None
        self.data = data_loss.DataLossTally()  # FunASR's silent substitutions and drops
        self.network = nccl_net.NcclNetwork()  # the network NCCL chose, from its INIT/NET lines
        self.stop: dict | None = None  # the last stop line the run printed (crash.read_stop)
        self.hung_note: str | None = None  # where the hang record went (hang.write_hung_record)

    def handle(self, line: bytes, out_fd: int) -> list[str]:
        if nccl_net.MARK in line:
            with self.lock:
                return [f"{PREFIX} {said}" for said in self.network.observe(line)]
        if _DATA_MARK in line:
            with self.lock:
                self.data.observe(line)
            return []
        fields = funasr_log.fast_fields(line, self.time_field) if len(line) <= funasr_log.MAX_LINE else None
        if fields is not None:
            with self.lock:
                return self._step(
                    out_fd, fields[4], fields[0], fields[2], lambda: self.slow_lines.observe_values(*fields)
                )
        parsed = funasr_log.parse_line(line, self.time_field)
        if parsed is None:
            return []
        kind, value = parsed
        with self.lock:
            now = time.monotonic()
            if kind == "val":
                self.slow_lines.val_lines += 1
                return _listed(self.silence.progress(now, VAL_LINE))
            if kind == "bad":
                self.slow_lines.bad_lines += 1
                if self.slow_lines.bad_example is None:
                    self.slow_lines.bad_example = f"{value}: {line[:160].decode('utf-8', 'replace')}"
                return []
            if kind == "mark":
                self.slow_lines.note_marker(*value)
                return _listed(self.silence.progress(now, value[0], value[1]))
            return self._step(
                out_fd, value.rank, value.index, value.batch, lambda: self.slow_lines.observe(value)
            )

    def _step(
        self, out_fd: int, rank: int, index: int, batch: int | None, observe: Callable[[], list[str]]
    ) -> list[str]:
        """A step line, under the lock, read on the fast path or field by field: the clocks and the
        samples served first (the first slow step's lines may wait for the settings read), then
        the slow-step lines, after a resumed silence's line and before a summary due."""
        self.last_step_fd, self.last_step_at = out_fd, time.monotonic()
        self.data.served += batch or 0
        lines = _listed(self.silence.progress(self.last_step_at, STEP, rank, index)) + observe()
        if self.summary_every and self.slow_lines.n_steps % self.summary_every == 0:
            lines += self.slow_lines.summary_lines(final=False)
        return lines


class Pump(threading.Thread):
    """Copies one pipe to one fd, parsing complete lines on the side."""

    def __init__(self, pipe, out_fd: int, core: PumpState, hint_fd: int | None):
        super().__init__(daemon=True, name=f"ftenv-watch-{out_fd}")
        self.pipe, self.src, self.out_fd = pipe, pipe.fileno(), out_fd
        self.core, self.hint_fd = core, hint_fd  # hint_fd None: hints inline in this stream
        self.tracebacks = crash.Tracebacks()  # one per stream: frames never mix across streams
        self.splitter = funasr_log.LineSplitter()
        self.parse = True
        self.last_data = time.monotonic()
        self.at_line_start = True  # the last byte written to out_fd was a newline (or none yet)

    def _hints(self, chunk: bytes) -> list[tuple[int, bytes]]:
        """(offset just past a step line's newline, the watchdog lines to insert there)."""
        if not self.parse:
            return []
        inserts, end = [], 0
        try:
            lines, end = self.splitter.feed(chunk)
            tracebacks = self.tracebacks
            # A traceback in this chunk (its first line may have begun in an earlier one), or one
            # still open: only then is each line looked at for it.
            look = tracebacks.open or TRACEBACK in chunk or (lines and TRACEBACK in lines[0])
            for line in lines:
                end += len(line) + 1
                if _TAG in line or nccl_net.MARK in line:
                    extra = self.core.handle(line, self.out_fd)
                    if extra:
                        inserts.append((end, "".join(f"{x}\n" for x in extra).encode()))
                else:
                    if RECOMPILE_MARK in line:  # Dynamo's: names the cause of the next slow step
                        with self.core.lock:
                            self.core.slow_lines.note_recompile()
                    elif (stop := crash.read_stop(line)) is not None:
                        with self.core.lock:
                            self.core.stop = stop
                    if look:  # the exception a crash ends with
                        tracebacks.feed(line, self.core.slow_lines.n_steps)
        except Exception as exc:  # never let the watching break the pass-through
            self.parse = False
            self.core.broken = f"{type(exc).__name__}: {exc}"
            # Right after the line being parsed (at a line start), or at the end of the summary.
            if 0 < end <= len(chunk) and chunk[end - 1 : end] == b"\n":
                inserts.append((end, f"{PREFIX} internal error, watching stopped: {exc}\n".encode()))
        return inserts

    def run(self) -> None:
        try:
            while True:
                chunk = os.read(self.src, CHUNK)
                if not chunk:
                    break
                self.last_data = time.monotonic()
                self.at_line_start = chunk.endswith(b"\n")
                inserts = self._hints(chunk)
                if not inserts:
                    write_all(self.out_fd, chunk)
                    continue
                start, hint_fd = 0, self.out_fd if self.hint_fd is None else self.hint_fd
                for end, text in inserts:
                    write_all(self.out_fd, chunk[start:end])
                    write_all(hint_fd, text)
                    start = end
                write_all(self.out_fd, chunk[start:])
            last = self.splitter.flush()
            if last is not None and self.parse and _TAG in last:
                self.core.handle(last, self.out_fd)  # counted; no hint after an unfinished line
        except BrokenPipeError:
            pass  # our reader went away: close our end so the command sees it, as without us
        except OSError as exc:
            self.core.broken = f"pass-through of fd {self.out_fd}: {exc}"
        finally:
            self.pipe.close()


def _listed(line: str | None) -> list[str]:
    return [line] if line else []


def place_lines(lines: list[str], pumps: list[Pump], preferred: int, out_fd: int, err_fd: int) -> None:
    """Write the watchdog's own lines into `preferred` (the stream that carried the step lines),
    unless it ended in the middle of a line: then into the other one; if both did, after a
    newline of our own."""
    text = "".join(f"{x}\n" for x in lines).encode()
    at_start = {p.out_fd: p.at_line_start for p in pumps}
    other = out_fd if preferred == err_fd else err_fd
    if at_start.get(preferred, True):
        target = preferred
    elif at_start.get(other, True):
        target = other
    else:
        target, text = preferred, b"\n" + text
    with contextlib.suppress(OSError):
        write_all(target, text)
