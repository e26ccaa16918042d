"""Relative audio paths, one rule for `prepare`, `check` and `finetune` (docs/data.md): a relative
path is read from the working directory, as Kaldi's tools, FunASR's scp2jsonl and FunASR's trainer
read it; where no file is there but one is in the list's own folder, a list written for that folder
is the likelier meaning. Where the two readings name different files, the one taken is said.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WORKING_DIR, LIST_DIR = "the working directory", "the list's folder"
#: Audio named by URL: FunASR fetches it, no file to find.
URLS = ("http://", "https://")


@dataclass(frozen=True)
class Resolved:
    """path: absolute (the reading taken); taken: WORKING_DIR or LIST_DIR; note: set where the
    two readings name different files and only one, or both, exist (what was taken and why)."""

    path: str
    taken: str = WORKING_DIR
    note: str | None = None


def resolve(audio: str, cwd: Path, list_dir: Path) -> Resolved:
    """The file a relative `audio` of a list in `list_dir` means, run from `cwd`."""
    if os.path.isabs(audio) or audio.startswith(URLS):
        return Resolved(audio)
    from_cwd = os.path.normpath(os.path.join(os.path.abspath(cwd), audio))
    from_list = os.path.normpath(os.path.join(os.path.abspath(list_dir), audio))
    if from_cwd == from_list:
        return Resolved(from_cwd)
    here, there = os.path.exists(from_cwd), os.path.exists(from_list)
    if here and there:
        return Resolved(
            from_cwd,
            WORKING_DIR,
            f"{audio}: both {from_cwd} (from {WORKING_DIR}) and {from_list} (from {LIST_DIR}) exist; "
            f"took {from_cwd}, as Kaldi and FunASR read relative paths",
        )
    if there:
        return Resolved(
            from_list,
            LIST_DIR,
            f"{audio}: not in {WORKING_DIR} ({from_cwd}); took {from_list} (from {LIST_DIR})",
        )
    return Resolved(from_cwd)


def trainer_path(audio: str, cwd: str | os.PathLike) -> str:
    """The file the trainer opens for a JSONL's audio path: itself when absolute, else from the
    working directory `cwd` (never the list's folder)."""
    return audio if os.path.isabs(audio) else os.path.join(cwd, audio)


def trainer_problem(audio: str, cwd: Path, manifest_dir: Path) -> str | None:
    """Why the trainer, which opens a JSONL's relative paths from its working directory only, will
    not find `audio` although the list's folder has it (None when that is not the case)."""
    found = resolve(audio, cwd, manifest_dir)
    if found.taken != LIST_DIR:
        return None
    return (
        f"{audio} is not in the trainer's working directory {cwd} but is in the manifest's folder "
        f"({found.path}): FunASR opens relative paths from the working directory; write absolute "
        "paths (`ftenv data prepare` does) or run from the manifest's folder"
    )
