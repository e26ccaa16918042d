"""What `ftenv data prepare` reads its lists into: one Row per utterance, one Rejected per line it
cannot use (never dropped silently), and the one way a list's lines are read (UTF-8, a byte-order
mark at the start taken off, CRLF or LF line ends), as other tools write them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BOM = "\ufeff"


@dataclass
class Row:
    """An utterance: its audio file, or where the audio comes from when it must be written out first
    (a wav.scp command, a segment of a recording: then `audio` is the recording)."""

    source: str
    line: int
    key: str
    audio: str
    text: str
    speaker: str | None = None
    command: str | None = None  # shell text whose standard output is the recording (`... |`)
    start: float | None = None  # a segment of the recording, in seconds
    end: float | None = None  # -1: to the recording's end
    channel: int | None = None

    @property
    def needs_writing(self) -> bool:
        return self.command is not None or self.start is not None


@dataclass
class Rejected:
    source: str
    line: int
    key: str
    reason: str


def read_lines(path: Path, rejected: list[Rejected]) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file without its line end; a line that is not UTF-8 is
    rejected, not fatal; a byte-order mark before the first line is not part of it."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                rejected.append(Rejected(str(path), number, "", "not UTF-8: re-encode the file"))
                continue
            yield number, text[1:] if number == 1 and text.startswith(BOM) else text


def key_problem(key: str) -> str | None:
    """Why `key` cannot be an utterance's key, or None. Every list ftenv writes or reads is one
    `key text` line per utterance (Kaldi's text, `ftenv eval`'s hypotheses, `eval score`'s input), so
    a key holds no whitespace and no control character (a reader would split it), and it must be
    UTF-8 (a file name that is not shows as unencodable characters). Refused, not escaped: no
    other tool would read an escaped form back (docs/data.md)."""
    if not key:
        return "an empty key"
    bad = next((c for c in key if c.isspace() or unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is None:
        return None
    cs = unicodedata.category(bad) == "Cs"
    what = "whitespace" if bad.isspace() else "bytes that are not UTF-8" if cs else "a control character"
    return (
        f"the key {key!r} holds {what} ({bad!a}): a key<TAB>text line cannot carry it; rename "
        "the file or the key (e.g. spaces to _)"
    )


#: KEY, then any run of spaces or tabs, then the value (trailing spaces and tabs are not part of it).
_PAIR = re.compile(r"^[ \t]*([^ \t]+)(?:[ \t]+(.*?))?[ \t]*$")


def split_pair(line: str) -> tuple[str, str] | None:
    """KEY and value of one Kaldi-style line (any run of spaces or tabs between them, as Kaldi and the
    scripts that write such lists mean it); None for a blank line. Every `key value` list ftenv reads
    (the data folder's lists, the transcripts `ftenv eval score` scores) splits its lines here."""
    m = _PAIR.match(line)
    return None if m is None else (m.group(1), m.group(2) or "")
