"""A Kaldi data folder as such folders really come (written by Kaldi, lhotse, ESPnet or a user's own
script, on any system): `wav.scp`, `text`, and when present `segments` and `utt2spk`, read into
rows for `ftenv data prepare`. Where this differs from Kaldi's and lhotse's readers: docs/data.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import paths
from ftenv.data.rows import Rejected, Row, read_lines, split_pair

#: A wav.scp value pointing into a Kaldi archive (`foo.ark:1234`): not audio a trainer can open.
_ARCHIVE = re.compile(r"\.ark:\d+$")
COMMAND_FLAG = "--run-commands"


@dataclass(frozen=True)
class KaldiFolder:
    """The lists of one Kaldi data folder (segments and utt2spk are None when absent)."""

    wav_scp: Path
    text: Path
    segments: Path | None = None
    utt2spk: Path | None = None

    @classmethod
    def find(cls, wav_scp: Path, text: Path | None = None) -> KaldiFolder:
        """From `--wav-scp` (the wav.scp file or its data folder) and an optional `--text`: the
        folder's own text, segments and utt2spk are used when present, as Kaldi's scripts do."""
        folder = wav_scp if wav_scp.is_dir() else wav_scp.parent
        scp = folder / "wav.scp" if wav_scp.is_dir() else wav_scp
        beside = {name: folder / name for name in ("segments", "utt2spk")}
        return cls(
            scp,
            text or folder / "text",
            beside["segments"] if beside["segments"].is_file() else None,
            beside["utt2spk"] if beside["utt2spk"].is_file() else None,
        )

    def lists(self) -> list[Path]:
        """The folder's lists that are read (what `prepare` must never write over)."""
        return [p for p in (self.wav_scp, self.text, self.segments, self.utt2spk) if p is not None]

    def missing(self) -> list[str]:
        return [str(p) for p in (self.wav_scp, self.text) if not p.is_file()]

    def describe(self) -> str:
        extra = [f"{p.name} {p}" for p in (self.segments, self.utt2spk) if p is not None]
        return f"Kaldi lists: wav.scp {self.wav_scp}, text {self.text}" + "".join(f", {x}" for x in extra)


def mapping(path: Path, rejected: list[Rejected], value_needed: bool = True) -> dict[str, tuple[int, str]]:
    """KEY -> (line, value) of a Kaldi list; a repeated key or a key without a value is rejected."""
    found: dict[str, tuple[int, str]] = {}
    for number, line in read_lines(path, rejected):
        pair = split_pair(line)
        if pair is None:
            continue  # an empty line
        key, value = pair
        if key in found:
            rejected.append(Rejected(str(path), number, key, f"key repeated (first on line {found[key][0]})"))
        elif value_needed and not value:
            rejected.append(Rejected(str(path), number, key, "nothing after the key"))
        else:
            found[key] = (number, value)
    return found


def speakers(utt2spk: Path, rejected: list[Rejected]) -> dict[str, str]:
    """KEY -> speaker of an utt2spk list, for `ftenv data prepare` and `ftenv data split` alike."""
    return {key: value.strip() for key, (_, value) in mapping(utt2spk, rejected).items()}


def _recording(value: str, cwd: Path, list_dir: Path, notes: list[str]) -> tuple[str, str | None] | str:
    """(path, command) of a wav.scp value, or why it cannot be used."""
    if value.endswith("|"):
        command = value[:-1].strip()
        return ("", command) if command else "an empty command (`|`)"
    if _ARCHIVE.search(value):
        return "a Kaldi archive offset (`.ark:N`): write the audio out first (`wav-copy`)"
    found = paths.resolve(value, cwd, list_dir)
    if found.note:
        notes.append(found.note)
    return found.path, None


def _segment(fields: list[str]) -> tuple[str, float, float, int | None] | str:
    """(recording, start, end, channel) of a segments line's fields after the key, or what is wrong."""
    if len(fields) not in (3, 4):
        return "a segments line is: UTTERANCE RECORDING START END [CHANNEL]"
    try:
        start, end = float(fields[1]), float(fields[2])
        channel = int(fields[3]) if len(fields) == 4 else None
    except ValueError:
        return f"start, end and channel must be numbers, got {' '.join(fields[1:])!r}"
    if not (math.isfinite(start) and math.isfinite(end)):
        return f"start and end must be finite numbers of seconds, got {' '.join(fields[1:3])!r}"
    if start < 0 or (end != -1 and end <= start) or (channel is not None and channel < 0):
        return f"an empty or invalid segment ({start} to {end} s; an end of -1 means the recording's end)"
    return fields[0], start, end, channel


def read(folder: KaldiFolder, cwd: Path, rejected: list[Rejected], notes: list[str]) -> tuple[list[Row], int]:
    """Rows in wav.scp's order (or segments' order), transcripts and speakers joined by key; the
    number of command entries. `notes` gets where a relative path's two readings disagreed."""
    texts = mapping(folder.text, rejected, value_needed=False)
    spoken = speakers(folder.utt2spk, rejected) if folder.utt2spk else {}
    recordings: dict[str, tuple[int, str, str | None]] = {}
    for key, (number, value) in mapping(folder.wav_scp, rejected).items():
        found = _recording(value, cwd, folder.wav_scp.parent, notes)
        if isinstance(found, str):
            rejected.append(Rejected(str(folder.wav_scp), number, key, found))
        else:
            recordings[key] = (number, *found)
    commands = sum(1 for _, _, command in recordings.values() if command is not None)
    rows: list[Row] = []
    if folder.segments is None:
        utterances = {
            key: (str(folder.wav_scp), number, key, None) for key, (number, _, _) in recordings.items()
        }
    else:
        utterances = {}
        for key, (number, value) in mapping(folder.segments, rejected).items():
            seg = _segment(value.split())
            if isinstance(seg, str):
                rejected.append(Rejected(str(folder.segments), number, key, seg))
            elif seg[0] not in recordings:
                rejected.append(
                    Rejected(str(folder.segments), number, key, f"no recording {seg[0]} in {folder.wav_scp}")
                )
            else:
                utterances[key] = (str(folder.segments), number, seg[0], seg[1:])
        used = {u[2] for u in utterances.values()}
        commands = sum(1 for k, (_, _, c) in recordings.items() if c is not None and k in used)
    for key, (source, number, recording, cut) in utterances.items():
        if key not in texts:
            rejected.append(Rejected(source, number, key, f"no transcript for this key in {folder.text}"))
            continue
        _, audio, command = recordings[recording]
        row = Row(source, number, key, audio, texts[key][1].strip(" \t"), command=command)
        row.speaker = spoken.get(key)
        if cut is not None:
            row.start, row.end, row.channel = cut
        rows.append(row)
    what = "segment" if folder.segments else "audio"
    where = folder.segments or folder.wav_scp
    for key, (number, _) in texts.items():
        if key not in utterances:
            rejected.append(Rejected(str(folder.text), number, key, f"no {what} for this key in {where}"))
    return rows, commands
