"""A data argument as FunASR reads it: a file named *.jsonl or *.json is the data; any other name
is a list of JSONL files, one path a line (funasr/datasets/fun_asr_datasets/datasets.py: it reads
the list with readlines() and opens each line stripped). The one home of that rule for `ftenv data
check`, `ftenv finetune`'s first look, its data gate and the trainer's data-loss count."""

from __future__ import annotations

from pathlib import Path

JSONL_SUFFIXES = (".jsonl", ".json")


class DataListError(ValueError):
    """A list of data files FunASR cannot read; the message names the file, the line and the fix."""


def is_list(path: str | Path) -> bool:
    """FunASR reads a data argument not named *.jsonl or *.json as a list of JSONL files (its test:
    the name ends so)."""
    return not str(path).endswith(JSONL_SUFFIXES)


def manifests(path: str | None, cwd: Path) -> list[Path]:
    """The JSONL files FunASR reads for a data argument: itself, or, for a list, the files it names,
    one a line with the line's surrounding whitespace stripped, as FunASR opens them (so a path may
    hold spaces; relative ones from the working directory). A blank line of a list is
    DataListError: FunASR opens an empty name there and every rank stops."""
    if not path:
        return []
    if not is_list(path) or not Path(path).is_file():
        return [Path(path)]
    found = []
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        name = line.strip()
        if not name:
            raise DataListError(
                f"{path} line {number} is blank: FunASR reads a file not named *.jsonl as a list of "
                "JSONL files, one a line, and opens an empty name there (every rank stops); remove the line"
            )
        found.append(Path(name) if Path(name).is_absolute() else cwd / name)
    return found
