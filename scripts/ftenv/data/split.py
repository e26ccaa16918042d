"""`ftenv data split`: training, validation (and test) sets from one prepared JSONL, by share or
count, at random with a seed or by speaker (no speaker in two sets), so that `ftenv finetune` has
the validation set it requires. The same input and options give the same bytes.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import chatml, kaldi, writes
from ftenv.data.rows import Rejected
from ftenv.data.sets import FILE_NAMES, SETS
from ftenv.outcome import UNUSABLE

PROG = "ftenv data split"


@dataclass(frozen=True)
class SplitOptions:
    """What `ftenv data split` was asked for (ftenv.commands.data)."""

    jsonl: str
    output_dir: str
    valid: str
    test: str | None = None
    seed: int = 0
    by_speaker: bool = False
    utt2spk: str | None = None


def size(raw: str, total: int) -> int:
    """Lines a set gets: `0.05` or `5%` is a share of the lines, `200` a count."""
    text = raw.strip()
    try:
        if text.endswith("%"):
            return round(total * float(text[:-1]) / 100)
        if "." in text:
            return round(total * float(text))
        return int(text)
    except (ValueError, OverflowError):  # OverflowError: round() of an infinite share ("inf%")
        raise ValueError(f"{raw!r} is neither a share (0.05, 5%) nor a count of lines (200)") from None


@dataclass
class Line:
    raw: bytes
    key: str
    speaker: str | None
    frames: int


def _read(path: Path, speakers: dict[str, str]) -> list[Line] | str:
    """The lines of the JSONL (blank ones skipped, as FunASR skips them), or the first that is not
    an utterance; a speaker from utt2spk before the line's own."""
    out = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            utt = chatml.read_line(raw)
            if isinstance(utt, chatml.Unreadable):
                if utt.code == chatml.BLANK:
                    continue
                return f"{path} line {number}: {utt.message} (`ftenv data check {path}` says more)"
            key = utt.key if utt.key is not None else str(number)
            speaker = speakers.get(key, utt.speaker)
            out.append(Line(raw if raw.endswith(b"\n") else raw + b"\n", key, speaker, utt.speech_length))
    return out


def assign(lines: list[Line], wanted: dict[str, int], seed: int, by_speaker: bool) -> dict[str, list[int]]:
    """Line indices per set (in file order): groups (a speaker, or a line) drawn in a seeded order
    fill test, then valid, up to their sizes; the rest is train."""
    groups: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        groups.setdefault(str(line.speaker) if by_speaker else f"{i}", []).append(i)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    sets: dict[str, list[int]] = {name: [] for name in SETS}
    for name in ("test", "valid"):
        while order and len(sets[name]) < wanted.get(name, 0):
            sets[name] += groups[order.pop()]
    sets["train"] = [i for g in order for i in groups[g]]
    return {name: sorted(indices) for name, indices in sets.items()}


def run(options: SplitOptions) -> int:
    source, out = Path(options.jsonl), Path(options.output_dir)
    if not source.is_file():
        print(f"{PROG}: {source} is not a file", file=sys.stderr)
        return UNUSABLE
    targets = {name: out / FILE_NAMES[name] for name in SETS if name != "test" or options.test}
    if out.exists() and not out.is_dir():
        print(f"{PROG}: --output-dir {out} is not a folder", file=sys.stderr)
        return UNUSABLE
    try:
        writes.refuse_clobber(
            [("--output-dir", out), *((f"the {name} set", t) for name, t in targets.items())],
            [("the JSONL", source), ("--utt2spk", options.utt2spk)],
            "choose another --output-dir",
            inside_ok=True,
        )
    except writes.ClobberError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return UNUSABLE
    rejected: list[Rejected] = []
    speakers = {}
    if options.utt2spk:
        speakers = kaldi.speakers(Path(options.utt2spk), rejected)
    lines = _read(source, speakers)
    if isinstance(lines, str):
        print(f"{PROG}: {lines}", file=sys.stderr)
        return UNUSABLE
    unknown = [line.key for line in lines if line.speaker is None]
    if options.by_speaker and unknown:
        print(
            f"{PROG}: --by-speaker, but {len(unknown)} of {len(lines)} lines have no speaker (e.g. "
            f"{unknown[0]}): give --utt2spk FILE, or prepare from a Kaldi folder with utt2spk",
            file=sys.stderr,
        )
        return UNUSABLE
    try:
        wanted = {"valid": size(options.valid, len(lines))}
        if options.test:
            wanted["test"] = size(options.test, len(lines))
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return UNUSABLE
    sets = assign(lines, wanted, options.seed, options.by_speaker)
    empty = [name for name in ("train", *wanted) if not sets[name]]
    if empty:
        print(f"{PROG}: the {' and '.join(empty)} set would be empty ({len(lines)} lines)", file=sys.stderr)
        return UNUSABLE
    out.mkdir(parents=True, exist_ok=True)
    for name, target in targets.items():
        writes.write_bytes(target, b"".join(lines[i].raw for i in sets[name]))
    for name, target in targets.items():
        chosen = [lines[i] for i in sets[name]]
        hours = sum(x.frames for x in chosen) / chatml.FRAMES_PER_SECOND / 3600
        voices = len({x.speaker for x in chosen if x.speaker is not None})
        who = f", {voices} speakers" if voices else ""
        print(f"{PROG}: {name}: {len(chosen)} lines, {hours:.2f} h{who} -> {target}", file=sys.stderr)
    how = "by speaker (no speaker in two sets)" if options.by_speaker else "at random"
    print(f"{PROG}: split {how}, seed {options.seed}", file=sys.stderr)
    return 0
