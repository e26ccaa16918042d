"""The one home of how ftenv writes what a user keeps: never over what the command reads (an output
that is, contains or lies inside an input is refused before any work, naming both), and each file
whole or not at all, under a temporary name created exclusively in the destination's own folder (a
random name opened with O_EXCL: never a fixed name, never through a link planted there).

Here, in the lowest wing that writes files, so that `data`, `evaluate` and `train` share it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class ClobberError(ValueError):
    """An output that would write over (or remove) an input; the message names both and the fix."""


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.abspath(path)))


def refuse_clobber(
    outputs: Iterable[tuple[str, str | os.PathLike]],
    inputs: Iterable[tuple[str, str | os.PathLike]],
    fix: str,
    inside_ok: bool = False,
) -> None:
    """ClobberError for the first (what, output) that is, contains or lies inside an (what, input),
    links followed. inside_ok: an output may lie inside an input folder or contain an input (a new
    file beside a corpus's recordings destroys nothing; only the same file would). Linear in the
    paths (a set of 100,000 recordings is checked in a moment)."""
    sources: dict[Path, tuple[str, str]] = {}
    for what, path in inputs:
        if path:
            sources.setdefault(_real(path), (what, str(path)))
    targets: dict[Path, tuple[str, str]] = {}
    for what, path in outputs:
        out = _real(path)
        targets.setdefault(out, (what, str(path)))
        if out in sources:
            _refuse((what, str(path)), "is", sources[out], fix)
        if not inside_ok:
            for parent in out.parents:
                if parent in sources:
                    _refuse((what, str(path)), "lies inside", sources[parent], fix)
    if inside_ok:
        return
    for src, named in sources.items():
        for parent in src.parents:
            if parent in targets:
                _refuse(targets[parent], "contains", named, fix)


def _refuse(output: tuple[str, str], how: str, source: tuple[str, str], fix: str) -> None:
    raise ClobberError(f"{output[0]} {output[1]} {how} {source[0]} {source[1]}: nothing was written; {fix}")


def file_problem(path: str | os.PathLike) -> str | None:
    """Why a file cannot be written at `path` (a folder there, a parent that is a file), or None."""
    target = Path(path)
    if target.is_dir():
        return f"{target} is a folder: name a file"
    parent = next((p for p in target.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        return f"{parent} is not a folder, so {target} cannot be written"
    return None


def folder_problem(path: str | os.PathLike) -> str | None:
    """Why files cannot be written into the folder `path` (a file there, a parent that is a file,
    a folder this user cannot write), or None: asked before the work, not found after it."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        return f"{target} exists and is not a folder: name a folder"
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        return f"{existing} is not a folder, so {target} cannot be made"
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable by uid {os.getuid()}: name a folder you can write"
    return None


def temp_dir_beside(path: str | os.PathLike) -> Path:
    """A new hidden temporary folder of this process alone beside `path` (random name, mkdtemp)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))


@contextmanager
def written_whole(path: str | os.PathLike, binary: bool = False) -> Iterator[IO]:
    """A file that appears at `path` only once complete; removed if the writing fails. The temporary
    file is created exclusively beside `path` (mkstemp: random name, O_EXCL, so a link or file of
    that name is never written through) and written through that descriptor; the rename at the end
    replaces a link at `path` rather than writing through it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    try:
        text = {} if binary else {"encoding": "utf-8", "newline": ""}
        with os.fdopen(fd, "wb" if binary else "w", **text) as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0o600; the file gets the usual mode
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    with written_whole(path) as fh:
        fh.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with written_whole(path, binary=True) as fh:
        fh.write(data)


def umask() -> int:
    """The process's umask: mkstemp and mkdtemp make 0o600 and 0o700; what is written gets the usual mode."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
