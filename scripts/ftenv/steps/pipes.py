"""`ftenv watch -- COMMAND [ARGS...]`: run a training command, pass its output through byte for
byte, and add one marked line when a step is several times the running median, saying why and
what to do.

Long because the pumps, the process and signal handling and the summary placement share one piece of
state and are only correct together.
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
from dataclasses import dataclass
from pathlib import Path

from ftenv import outcome, variables
from ftenv.attention import live
from ftenv.steps import crash, data_loss, funasr_log, hang, nccl_net
from ftenv.steps.crash import TRACEBACK
from ftenv.steps.silence import STEP, VAL_LINE, Silence, SilenceLimits
from ftenv.steps.thresholds import LIVE_WARMUP, REPEAT, SLOW_FACTOR, STOP_GRACE_S
from ftenv.steps.watcher import PREFIX, RECOMPILE_MARK, Watcher

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
CHUNK = 1 << 16
#: How much later a step line printed before a traceback (in the other pipe) may be read.
READ_SLACK_S = 1.0
#: Cheap test before parsing a line: both step-line tags contain it.
_TAG = b", rank: "
_DATA_MARK = data_loss.MARK.encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class _Core:
    """The shared state of both pumps: parsing, the Watcher, the silence clock, the tracebacks,
    and where hints go."""

    def __init__(self, watcher: Watcher, summary_every: int, time_field: str, silence: Silence):
        self.watcher = watcher
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
                self.last_step_fd, self.last_step_at = out_fd, time.monotonic()
                self.data.served += fields[2] or 0
                resumed = self.silence.progress(self.last_step_at, STEP, fields[4], fields[0])
                lines = self.watcher.observe_values(*fields)
                if resumed:
                    lines.insert(0, resumed)
                if self.summary_every and self.watcher.n_steps % self.summary_every == 0:
                    lines += self.watcher.summary_lines(final=False)
                return lines
        parsed = funasr_log.parse_line(line, self.time_field)
        if parsed is None:
            return []
        kind, value = parsed
        with self.lock:
            now = time.monotonic()
            if kind == "val":
                self.watcher.val_lines += 1
                return _listed(self.silence.progress(now, VAL_LINE))
            if kind == "bad":
                self.watcher.bad_lines += 1
                if self.watcher.bad_example is None:
                    self.watcher.bad_example = f"{value}: {line[:160].decode('utf-8', 'replace')}"
                return []
            if kind == "mark":
                self.watcher.note_marker(*value)
                return _listed(self.silence.progress(now, value[0], value[1]))
            self.last_step_fd, self.last_step_at = out_fd, now
            self.data.served += value.batch or 0
            resumed = self.silence.progress(now, STEP, value.rank, value.index)
            lines = self.watcher.observe(value)
            if resumed:
                lines.insert(0, resumed)
            if self.summary_every and self.watcher.n_steps % self.summary_every == 0:
                lines += self.watcher.summary_lines(final=False)
            return lines


class _Pump(threading.Thread):
    """Copies one pipe to one fd, parsing complete lines on the side."""

    def __init__(self, pipe, out_fd: int, core: _Core, hint_fd: int | None):
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
                            self.core.watcher.note_line(line)
                    elif crash.STOP_MARK in line and (stop := crash.read_stop(line)) is not None:
                        with self.core.lock:
                            self.core.stop = stop
                    if look:  # the exception a crash ends with
                        tracebacks.feed(line, self.core.watcher.n_steps)
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
                    _write_all(self.out_fd, chunk)
                    continue
                start = 0
                for end, text in inserts:
                    if self.hint_fd is None:
                        _write_all(self.out_fd, chunk[start:end])
                        _write_all(self.out_fd, text)
                    else:
                        _write_all(self.out_fd, chunk[start:end])
                        _write_all(self.hint_fd, text)
                    start = end
                _write_all(self.out_fd, chunk[start:])
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


def output_folder(argv: list[str]) -> Path:
    """Where the watchdog writes files (the stacks of a silent run): the trainer's output folder
    (FunASR's `++output_dir=` override), else the current directory."""
    for arg in reversed(argv):
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key == "output_dir" and value:
            return Path(value)
    return Path.cwd()


def _cannot_start(argv: list[str], exc: OSError) -> int:
    """Say why the command did not start and return the shell's code for it (127 not found, 126
    not runnable), as `sh -c` would."""
    if isinstance(exc, FileNotFoundError):
        print(f"ftenv watch: command not found: {argv[0]}", file=sys.stderr)
        return 127
    if isinstance(exc, PermissionError):
        print(f"ftenv watch: permission denied: {argv[0]}", file=sys.stderr)
        return 126
    print(f"ftenv watch: cannot run {shlex.join(argv)}: {exc}", file=sys.stderr)
    return 126


def _place(lines: list[str], pumps: list[_Pump], preferred: int, out_fd: int, err_fd: int) -> None:
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
        _write_all(target, text)


def _wait(proc: subprocess.Popen, core: _Core, say, root_folder: Path, grace_s: float) -> tuple[int, bool]:
    """Wait for the command while watching the silence (ftenv.steps.silence): the alarm (with the
    stacks, ftenv.steps.hang) and, at the hard limit, the stop. Returns (exit status, hung)."""
    silence = core.silence
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
        with core.lock:
            due = silence.due(now)
        if due == "alarm":
            stacks = stacks_line = hang.dump_stacks(proc.pid, root_folder, silence.silence(now))
            with core.lock:
                say([silence.alarm_line(time.monotonic(), stacks)])
        elif due == "hang":
            with core.lock:
                say([silence.hang_line(now, grace_s)])
            rc = hang.stop_command(proc, grace_s)
            core.hung_note = hang.write_hung_record(root_folder, silence.silence(now), stacks_line)
            return rc, True


def watch(
    argv: list[str],
    *,
    factor: float = SLOW_FACTOR,
    warmup: int = LIVE_WARMUP,
    repeat: int = REPEAT,
    summary: bool = True,
    summary_every: int = 0,
    hint_stream: str = "same",
    time_field: str = "phases",
    drain_s: float = 3.0,
    settings=None,
    silence: SilenceLimits | None = None,
    output_dir: Path | None = None,
    stop_grace_s: float = STOP_GRACE_S,
) -> int:
    """Run argv under the watchdog; returns its exit code (128+N when signal N ended it; HUNG
    when the silence alarm's hard limit stopped it). settings: a callable returning
    AttentionSettings (tests); default reads the live settings. silence: the alarm's limits
    (default: SilenceLimits(), the documented defaults)."""
    folder = output_dir or output_folder(argv)
    env = {**os.environ, **hang.command_env(folder)}  # the trainer entry lets us read its stacks
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0, env=env
        )
    except OSError as exc:
        return _cannot_start(argv, exc)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED:
            previous[sig] = signal.signal(sig, forward)
    read_settings = settings or (lambda: live.read_live_settings(proc.pid))
    watcher = Watcher(
        factor=factor,
        warmup=warmup,
        repeat=repeat,
        settings=read_settings,
        time_holds_pause=time_field == "total",
    )
    core = _Core(watcher, summary_every, time_field, Silence(silence or SilenceLimits()))
    out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    sys.stdout.flush()
    sys.stderr.flush()
    hint_fd = err_fd if hint_stream == "stderr" else None
    pumps = [_Pump(proc.stdout, out_fd, core, hint_fd), _Pump(proc.stderr, err_fd, core, hint_fd)]
    for p in pumps:
        p.start()

    def say(lines: list[str]) -> None:
        _place(lines, pumps, hint_fd or core.last_step_fd or err_fd, out_fd, err_fd)

    try:
        rc, hung = _wait(proc, core, say, folder, stop_grace_s)
        exited = time.monotonic()
        # The command is gone; its output may still be in the pipes (or a leftover grandchild may
        # hold them open): drain until EOF, or until nothing came for drain_s seconds after the exit.
        for p in pumps:
            while p.is_alive():
                p.join(timeout=0.1)
                if p.is_alive() and time.monotonic() - max(p.last_data, exited) > drain_s:
                    break
        code = outcome.HUNG if hung else (128 - rc if rc < 0 else rc)
        with core.lock:  # a pump still draining a leftover's output may be counting
            data_failed = code == 0 and core.data.failed()  # the command's code, unless FunASR lost data
            lines = _closing_lines(core, pumps, code, hung, folder) if code else []
            if summary and (
                watcher.n_steps or watcher.val_lines or watcher.bad_lines or core.broken or data_failed
            ):
                label = (
                    crash.STOP_VERDICT_LABEL
                    if code == outcome.STOPPED
                    else crash.VERDICT_LABEL
                    if code
                    else "verdict"
                )
                lines += watcher.summary_lines(final=True, verdict_label=label)
                lines += core.data.summary_lines(PREFIX)
                if data_failed:
                    lines.append(
                        f"{PREFIX} exit 1: the training ran, but on data FunASR silently lost (above)"
                    )
                if watcher.bad_lines:
                    lines.append(
                        f"{PREFIX} {watcher.bad_lines} lines began like a training step but had no rank "
                        f"or no usable time (passed through, not judged), e.g. {watcher.bad_example}"
                    )
                if core.broken:
                    lines.append(f"{PREFIX} note: {core.broken}")
        if lines:
            say(lines)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if data_failed else code


def _closing_lines(core: _Core, pumps: list[_Pump], code: int, hung: bool, folder: Path) -> list[str]:
    """The first closing line when the command did not finish: stopped and saved (exit STOPPED), or
    how it failed (its exit code, or the hang's stop), after which step, and the exception it ended
    with."""
    watcher = core.watcher
    last_step = watcher.steps[-1][0] if watcher.steps else None
    if code == outcome.STOPPED and not hung:
        return [crash.stopped_line(core.stop, last_step, str(folder), prefix=PREFIX)]
    # stderr first: where Python and torchrun write an uncaught exception.
    crashes = (p.tracebacks.crash(watcher.n_steps, core.last_step_at, READ_SLACK_S) for p in reversed(pumps))
    error = next((e for e in crashes if e), None)
    if hung:
        how = (
            f"the training command was STOPPED (no trainer line for the hard limit, a hang; exit code {code})"
        )
        return [
            crash.failure_line(None, error, last_step, how=how, prefix=PREFIX),
            f"{PREFIX} {core.hung_note}",
        ]
    return [crash.failure_line(code, error, last_step, prefix=PREFIX)]


def watch_enabled(environ=None) -> bool:
    return (environ if environ is not None else os.environ).get(variables.WATCH, "1") != "0"


def run_watched(argv: list[str], **options) -> int:
    """For launchers (`ftenv finetune`): run argv under the watchdog, or, with FTENV_WATCH=0, exec
    it plainly (this process becomes the command; returns only if exec fails)."""
    if not argv:
        print("ftenv watch: no command given", file=sys.stderr)
        return 2
    if not watch_enabled():
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            return _cannot_start(argv, exc)
    code = watch(argv, **options)
    # The command is gone and its code decided: a late signal (Slurm ends the other nodes' tasks
    # when one exits first) must not turn this process's exit into 128+N while it shuts down.
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_IGN)
    return code


@dataclass(frozen=True)
class WatchOptions:
    """What `ftenv watch` was asked for (ftenv.commands.watch); `cmd` may start with `--`."""

    cmd: tuple[str, ...]
    factor: float = SLOW_FACTOR
    warmup: int = LIVE_WARMUP
    repeat: int = REPEAT
    summary: bool = True
    summary_every: int = 0
    hint_stream: str = "same"  # same or stderr
    time: str = "phases"  # phases or total
    output_dir: Path | None = None


def run(options: WatchOptions) -> int:
    argv = list(options.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print(
            "ftenv watch: no command given; usage: ftenv watch [OPTIONS] -- COMMAND [ARGS...]",
            file=sys.stderr,
        )
        return 2
    try:
        limits = SilenceLimits.from_env()
    except ValueError as exc:
        print(f"ftenv watch: {exc}", file=sys.stderr)
        return outcome.UNUSABLE
    return run_watched(
        argv,
        silence=limits,
        output_dir=options.output_dir,
        factor=options.factor,
        warmup=options.warmup,
        repeat=options.repeat,
        summary=options.summary,
        summary_every=options.summary_every,
        hint_stream=options.hint_stream,
        time_field=options.time,
    )
