"""Read FunASR's per-step log lines (funasr/train_utils/trainer_ds.py, Trainer.log) into Steps, on
bytes, since the watchdog must not decode what it passes through.

Long because the fast path, the field-by-field path, the markers and the file scan must read every
line alike: they are tested as one.
"""

from __future__ import annotations

import gzip
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.watchdog.step import CHECKPOINT, EPOCH, VALIDATION, Step, mark_apart, note_marker

TRAIN = b"train, rank: "
VAL = b"val, rank: "
PHASES = ("data_load", "forward_time", "backward_time", "optim_time")
_PHASE_KEYS = [(name, b"'" + name.encode() + b"': '") for name in (*PHASES, "total_time")]
#: Longest line kept for parsing; longer ones pass through the watchdog but are not parsed
#: (a FunASR step line is about 1 kB).
MAX_LINE = 1 << 16
#: Dynamo's line when a new shape breaks a compiled graph's guards (ftenv finetune --compile turns
#: its recompile log on): a slow new-shape step after it is put down to recompiling, not to cuDNN.
RECOMPILE_MARK = b"Recompiling function"


def _field(line: bytes, key: bytes, end: bytes) -> bytes | None:
    i = line.find(key)
    if i < 0:
        return None
    i += len(key)
    j = line.find(end, i)
    return line[i:j] if j >= 0 else None


def _int(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _float(raw: bytes | None) -> float | None:
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def _usable(value: float | None) -> bool:
    """A time the statistics can use: a finite number of 0 or more seconds."""
    return value is not None and math.isfinite(value) and value >= 0


def _pause(total: float | None, phases: tuple[float, ...]) -> float | None:
    """total_time minus the phases (never below 0: both are rounded to 1 ms in the log)."""
    if total is None or len(phases) != len(PHASES):
        return None
    return round(max(0.0, total - sum(phases)), 6)


#: The bytes a log message's tag may not follow (it would be inside a word), for both paths.
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _tagged(line: bytes, tag: bytes) -> int:
    """Offset just past `tag` when it starts the log message (not inside a word), else -1."""
    i = line.find(tag)
    while i > 0 and line[i - 1] in _WORD:
        i = line.find(tag, i + 1)
    return i + len(tag) if i >= 0 else -1


# The fast path: the exact layout Trainer.log writes (one regex search each); anything else goes
# through the field-by-field path below.
# Integers of at most 18 digits: a longer one (which int() may refuse) takes the slow path.
_HEAD = re.compile(
    rb"train, rank: (\d{1,18}), epoch: [^,]*, data_slice: [^,]*, step_in_slice: [^,]*, "
    rb"step_in_epoch: (\d{1,18}), total step: (\d{1,18}), "
)
_SHAPE = re.compile(rb"\('batch_size', (\d{1,18})\), \('batch_size_x_tokens', (\d{1,18})\)")
_NUM = rb"'(\d{1,9}(?:\.\d{1,9})?)'"
_SPEED = re.compile(
    rb"\{'data_load': "
    + _NUM
    + rb", 'forward_time': "
    + _NUM
    + rb", 'backward_time': "
    + _NUM
    + rb", 'optim_time': "
    + _NUM
    + rb", 'total_time': "
    + _NUM
    + rb"\}"
)
#: The trainer's lines around the steps (train_epoch, validate_epoch, save_checkpoint): the words
#: each begins with, by the marker it is.
MARKER_WORDS = {EPOCH: "Train epoch:", VALIDATION: "Validate epoch:", CHECKPOINT: "Save checkpoint:"}
_MARKERS = tuple(
    (re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(words.encode()) + rb" \d+, rank: (\d+)"), kind)
    for kind, words in MARKER_WORDS.items()
)


def fast_fields(line: bytes, time: str = "phases"):
    """The hot path for the watchdog: (index, seconds, batch, padded_len, rank, (data_load,
    forward, backward, optim), step_in_epoch, pause) for a training line in Trainer.log's exact
    layout, else None (then parse_line decides). No Step is built: a frozen dataclass costs more
    than the parsing. The numbers it takes (at most 9 digits each side of the point) are finite."""
    head = _HEAD.search(line)
    if head is None:
        return None
    at = head.start()
    if at and line[at - 1] in _WORD:
        return None
    speed = _SPEED.search(line, head.end())
    if speed is None:
        return None
    d, f, b, o, t = map(float, speed.groups())
    shape = _SHAPE.search(line, head.end(), speed.start())
    batch = padded = None
    if shape is not None:
        batch = int(shape.group(1))
        if batch:
            padded = int(shape.group(2)) // batch
        else:
            batch = None
    inside = d + f + b + o
    seconds = round(inside, 6) if time == "phases" else t
    values = (d, f, b, o)
    pause = round(t - inside, 6) if t > inside else 0.0  # _pause, inlined: the watchdog's hot path
    return int(head.group(3)), seconds, batch, padded, int(head.group(1)), values, int(head.group(2)), pause


def _fast(line: bytes, time: str) -> Step | None:
    fields = fast_fields(line, time)
    if fields is None:
        return None
    index, seconds, batch, padded, rank, values, step_in_epoch, pause = fields
    phases = tuple(zip(PHASES, values, strict=True))
    return Step(index, seconds, batch, padded, rank, None, phases, step_in_epoch, pause)


def marker(line: bytes) -> tuple[str, int] | None:
    """(EPOCH | VALIDATION | CHECKPOINT, rank) for the trainer's lines around the steps."""
    for pattern, kind in _MARKERS:
        m = pattern.search(line)
        if m is not None:
            rank = _int(m.group(1))
            return None if rank is None else (kind, rank)
    return None


def parse_line(line: bytes, time: str = "phases") -> tuple[str, Step | str | int | None] | None:
    """None for a line that is not a step line; ("val", None) for a validation line;
    ("train", Step) for a training step; ("bad", reason) for a line that starts like a training
    step but lacks what is needed (rank or a usable time); ("mark", (kind, rank)) for the
    trainer's `Train epoch:`, `Validate epoch:` and `Save checkpoint:` lines. Step.index is
    FunASR's `total step`, or -1 when absent (the caller numbers such steps)."""
    if len(line) > MAX_LINE:
        return None
    step = _fast(line, time)
    if step is not None:
        return ("train", step)
    at = _tagged(line, TRAIN)
    if at < 0:
        if _tagged(line, VAL) >= 0:
            return ("val", None)
        found = marker(line) if b"epoch: " in line or b"checkpoint: " in line else None
        return ("mark", found) if found else None
    comma = line.find(b",", at)
    rank = _int(line[at : comma if comma >= 0 else len(line)].strip())
    if rank is None:
        return ("bad", "no readable rank")
    raw = {name: _field(line, key, b"'") for name, key in _PHASE_KEYS}
    times = {name: _float(value) for name, value in raw.items()}
    unusable = [
        f"{name} '{value[:24].decode('utf-8', 'replace')}'"
        for name, value in raw.items()
        if value is not None and not _usable(times[name])
    ]
    if unusable:
        return ("bad", "a time that is not a finite number of 0 or more seconds: " + ", ".join(unusable))
    phases = tuple((name, times[name]) for name in PHASES if times[name] is not None)
    if time == "phases" and len(phases) == len(PHASES):
        seconds = sum(v for _, v in phases)
    elif times["total_time"] is not None:
        seconds = times["total_time"]
    else:
        return ("bad", "no total_time and not all of " + ", ".join(PHASES))
    if not math.isfinite(seconds):
        return ("bad", "the step time adds up to more than a float holds")
    index = _int(_field(line, b"total step: ", b","))
    batch = _int(_field(line, b"('batch_size', ", b")"))
    tokens = _int(_field(line, b"('batch_size_x_tokens', ", b")"))
    padded = tokens // batch if batch and batch > 0 and tokens is not None and tokens >= 0 else None
    step = Step(
        index=index if index is not None else -1,
        seconds=round(seconds, 6),
        batch=batch if padded is not None else None,
        padded_len=padded,
        rank=rank,
        phases=phases,
        step_in_epoch=_int(_field(line, b"step_in_epoch: ", b",")),
        pause=_pause(times["total_time"], tuple(v for _, v in phases)),
    )
    return ("train", step)


class LineSplitter:
    """Cuts a byte stream into lines (on b"\\n") for parsing, without holding more than MAX_LINE
    bytes of an unfinished line: the rest of an over-long line is skipped."""

    def __init__(self) -> None:
        self._carry = b""
        self._skipping = False

    def feed(self, chunk: bytes) -> tuple[list[bytes], int]:
        """The complete lines that this chunk ends (without b"\\n"; the first one may have begun
        in earlier chunks), and the offset in the chunk where the first of them begins (negative
        when it began earlier): line k ends at offset start + sum(len(line) + 1 for lines 0..k)."""
        lines = chunk.split(b"\n")
        tail = lines.pop()
        start = -len(self._carry)
        if lines:
            if self._skipping:
                # The first piece ends an over-long line: nothing to parse (an empty line), with
                # the offsets shifted by its length.
                start, lines[0] = len(lines[0]), b""
            elif self._carry:
                lines[0] = self._carry + lines[0]
            self._carry, self._skipping = b"", False
        if not self._skipping:
            self._carry += tail
            if len(self._carry) > MAX_LINE:
                self._carry, self._skipping = b"", True
        return lines, start

    def flush(self) -> bytes | None:
        """The unfinished last line at end of stream, if any (and not over-long)."""
        line, self._carry = self._carry, b""
        skipped, self._skipping = self._skipping, False
        return line if line and not skipped else None


@dataclass
class LogScan:
    """What one or several log files hold."""

    steps: list[Step] = field(default_factory=list)
    val_lines: int = 0
    bad_lines: int = 0
    bad_examples: list[str] = field(default_factory=list)
    lines: int = 0
    files: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # "PATH: why"
    binary: list[str] = field(default_factory=list)
    #: Trainer lines around the steps: EPOCH / VALIDATION / CHECKPOINT -> how many.
    markers: dict[str, int] = field(default_factory=dict)
    _pending: dict[int, list[str]] = field(default_factory=dict, repr=False)

    def add(self, parsed, line: bytes, where: str) -> None:
        if parsed is None:
            return
        kind, value = parsed
        if kind == "train":
            before = tuple(self._pending.pop(value.rank, ()))
            self.steps.append(value.with_changes(before=before) if before else value)
        elif kind == "val":
            self.val_lines += 1
        elif kind == "mark":
            mark, rank = value
            self.markers[mark] = self.markers.get(mark, 0) + 1
            note_marker(self._pending, mark, rank)
        else:
            self.bad_lines += 1
            if len(self.bad_examples) < 3:
                text = line.decode("utf-8", "replace")
                self.bad_examples.append(f"{where}: {value}: {text[:160]}")


def _open(path: Path):
    with open(path, "rb") as head:
        magic = head.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def scan_files(paths: list[str], time: str = "phases", on_line=None) -> LogScan:
    """Parse every file; a missing or unreadable one is listed in `unreadable`, never raised.
    Steps come back per rank in step order (files may be given in any order, e.g. rotated logs
    `train.log train.log.1`), identical repeats (overlapping files) dropped, and unnumbered steps
    numbered in file order. on_line(line, steps so far), when given, sees every line (what is
    not a step: the start-up report, a traceback)."""
    scan = LogScan()
    for name in paths:
        path = Path(name)
        try:
            if path.is_dir():
                raise IsADirectoryError("is a directory")
            splitter, lineno, nul = LineSplitter(), 0, False
            with _open(path) as fh:
                while chunk := fh.read(1 << 20):
                    nul = nul or b"\x00" in chunk[:8192]
                    for line in splitter.feed(chunk)[0]:
                        lineno += 1
                        scan.add(parse_line(line, time), line, f"{name}:{lineno}")
                        if on_line is not None:
                            on_line(line, len(scan.steps))
                last = splitter.flush()
                if last is not None:
                    lineno += 1
                    scan.add(parse_line(last, time), last, f"{name}:{lineno}")
                    if on_line is not None:
                        on_line(last, len(scan.steps))
            scan.lines += lineno
            scan._pending.clear()  # markers never carry over from one file to the next
            scan.files.append(name)
            if nul:
                scan.binary.append(name)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            scan.unreadable.append(f"{name}: {why}")
    scan.steps = mark_apart(order_steps(scan.steps), time_holds_pause=time == "total")
    return scan


def order_steps(steps: list[Step]) -> list[Step]:
    """Per rank: number unnumbered steps, sort by step index (stable), drop exact duplicates."""
    by_rank: dict[int, list[Step]] = {}
    for s in steps:
        by_rank.setdefault(s.rank, []).append(s)
    out = []
    for rank in sorted(by_rank):
        numbered, dupes = [], set()
        for i, s in enumerate(by_rank[rank]):
            if s.index < 0:
                s = s.with_changes(index=i + 1)
            key = (s.index, s.seconds, s.shape)
            if key not in dupes:
                dupes.add(key)
                numbered.append(s)
        numbered.sort(key=lambda s: s.index)
        out.extend(numbered)
    return out
