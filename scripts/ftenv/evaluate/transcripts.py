"""`key<TAB>text` transcript files, the format of FunASR's recipe (`decode.py` writes it, `compute-wer`
reads it): read strictly, so that a broken file is named with its line instead of being scored wrong,
and written whole or not at all."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ftenv.data import writes
from ftenv.data.rows import split_pair

_ONE_LINE = str.maketrans("\t\r\n", "   ")


class TranscriptFileError(ValueError):
    """A transcript file that cannot be scored; the message names the path, the line and the fix."""


def read_transcripts(path: Path) -> dict[str, str]:
    """{key: text} in the file's order. A line is the key, whitespace (tab or spaces), then the text
    (absent: an empty transcript); blank lines are skipped; a byte-order mark and CRLF endings are
    accepted. Not UTF-8, a repeated key or no line at all raise TranscriptFileError."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        number = data[: exc.start].count(b"\n") + 1
        raise TranscriptFileError(f"{path}: line {number} is not UTF-8: re-encode the file") from None
    found: dict[str, str] = {}
    first_line: dict[str, int] = {}
    # Split on newlines only: str.splitlines would also split on separators inside a transcript.
    for number, line in enumerate(text.split("\n"), start=1):
        pair = split_pair(line.rstrip("\r"))
        if pair is None:
            continue
        key, text = pair
        if key in found:
            raise TranscriptFileError(
                f"{path}: line {number}: key {key!r} repeated (first on line {first_line[key]}): "
                "keep one transcript per key"
            )
        found[key] = text
        first_line[key] = number
    if not found:
        raise TranscriptFileError(f"{path}: no transcript in the file: expected lines of key<TAB>text")
    return found


def write_transcripts(path: Path, transcripts: Mapping[str, str]) -> None:
    """One `key<TAB>text` line per entry, never half a file.
    Newlines and tabs inside a text become spaces, so that each line stays one key and one text."""
    with writes.written_whole(path) as fh:
        for key, text in transcripts.items():
            fh.write(f"{key}\t{text.translate(_ONE_LINE)}\n")
