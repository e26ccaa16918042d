"""Rows of the inputs other than Kaldi folders (ftenv.data.kaldi) for `ftenv data prepare`: a TSV/CSV
table and a folder of audio with transcripts beside it; and the one check that a set's keys are
fit for it (each one line's worth, unique, one audio file each).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

from ftenv.data import extract, paths
from ftenv.data.rows import Rejected, Row, key_problem, read_lines

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a")
TRANSCRIPT_SUFFIXES = (".txt", ".lab")
PATH_HEADERS = {"path", "audio", "wav", "file", "filename", "audio_path", "audio_filepath"}


def _table_rows(table: Path, rejected: list[Rejected]) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each row of one line; a row whose quoted cell runs over several lines
    (or whose quote is never closed) is rejected with its lines: a transcript is one line."""
    delimiter = "\t" if table.suffix.lower() in (".tsv", ".tab") else ","
    numbered = list(read_lines(table, rejected))
    reader = csv.reader((line for _, line in numbered), delimiter=delimiter)
    done = 0  # lines the reader has consumed
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            done = max(reader.line_num, 1)
            number = numbered[done - 1][0]
            rejected.append(Rejected(str(table), number, "", f"not a {delimiter!r}-separated row: {exc}"))
            continue
        first, last = numbered[done][0], numbered[reader.line_num - 1][0]
        done = reader.line_num
        if last != first:
            rejected.append(
                Rejected(
                    str(table),
                    first,
                    "",
                    f"a quoted cell runs from line {first} to {last} (a quote not closed?): one row a line",
                )
            )
            continue
        yield first, cells


def from_table(table: Path, cwd: Path, rejected: list[Rejected], notes: list[str]) -> list[Row]:
    """Rows of a TSV (.tsv, tab) or CSV (comma): audio path, transcript; a header row is skipped."""
    rows = []
    for index, (number, cells) in enumerate(_table_rows(table, rejected)):
        if not cells or not any(c.strip() for c in cells):
            continue
        if index == 0 and cells[0].strip().lower() in PATH_HEADERS:
            continue
        if len(cells) < 2:
            rejected.append(Rejected(str(table), number, "", "expected two columns: audio path, transcript"))
            continue
        if any(c.strip() for c in cells[2:]):
            rejected.append(
                Rejected(
                    str(table),
                    number,
                    "",
                    f"{len(cells)} columns, expected two (audio path, transcript): quote a transcript "
                    "that holds the separator",
                )
            )
            continue
        path = cells[0].strip()
        found = paths.resolve(path, cwd, table.parent)
        if found.note:
            notes.append(found.note)
        rows.append(Row(str(table), number, Path(path).stem, found.path, cells[1].strip()))
    return rows


def from_folder(folder: Path, rejected: list[Rejected]) -> list[Row]:
    """Each audio file under folder (sorted), with the transcript of the same name beside it."""
    rows = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file()):
        key = path.relative_to(folder).with_suffix("").as_posix().replace("/", "__")
        transcript = next(
            (path.with_suffix(s) for s in TRANSCRIPT_SUFFIXES if path.with_suffix(s).is_file()), None
        )
        if transcript is None:
            rejected.append(Rejected(str(path), 0, key, f"no transcript beside it ({path.stem}.txt)"))
            continue
        try:
            text = " ".join(transcript.read_text(encoding="utf-8").split())
        except UnicodeDecodeError:
            rejected.append(Rejected(str(transcript), 0, key, "transcript not UTF-8: re-encode it"))
            continue
        rows.append(Row(str(transcript), 1, key, os.path.abspath(path), text))
    return rows


def checked_keys(rows: list[Row], rejected: list[Rejected]) -> list[Row]:
    """The rows whose keys a set can hold: a key a line cannot carry (ftenv.data.rows.key_problem), a
    key already used and a key whose audio file name another key's already takes (`a/b` and `a__b`
    both write `a__b.wav`) are rejected rows naming the first, never two lines on one file."""
    kept, keys, names = [], {}, {}
    for row in rows:
        first = keys.get(row.key)
        name = extract.file_name(row.key) if row.needs_writing else None
        other = names.get(name) if name else None
        if problem := key_problem(row.key):
            why = problem
        elif first is not None:
            why = f"key repeated (first in {first.source} line {first.line}, audio {first.audio})"
        elif other is not None:
            why = (
                f"its audio file {name} is also key {other.key!r}'s ({other.source} line {other.line}): "
                "rename one of the keys"
            )
        else:
            keys[row.key] = row
            if name:
                names[name] = row
            kept.append(row)
            continue
        rejected.append(Rejected(row.source, row.line, row.key, why))
    return kept
