"""Every file the trainer saves with torch.save to a path is written whole or not at all.

The pinned FunASR writes `model.pt.epE[.S]`, `model.pt`, `model.pt.best` and `model.pt.avgN` in place
(a plain torch.save to the final name). A crash, a SIGKILL or a full disk in the middle leaves a
cut file under the final name, and every restart then fails in torch.load. Here torch.save, in the
trainer's process only, writes to a temporary name beside the file (a dot name FunASR never
lists), fsyncs it, renames it over the final name and fsyncs the folder: the final name holds the
old file or the new one, never a part. A save that fails removes its temporary file and says how
much space is left.
"""

from __future__ import annotations

import contextlib
import functools
import os

from ftenv.train.runlife.record import temp_name

_MB = 1 << 20


def _fsync_path(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written; the file under the final name is untouched."""


def _failure(path: str, tmp: str, exc: BaseException) -> CheckpointWriteError:
    written = 0
    with contextlib.suppress(OSError):
        written = os.path.getsize(tmp)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.statvfs(folder)
        free = st.f_bavail * st.f_frsize
        space = f"{folder} has {free / _MB:.1f} MB free"
        full = free < max(written, _MB)
    except OSError:
        space, full = f"free space on {folder} unknown", False
    why = "the disk is full" if full else "the write failed"
    return CheckpointWriteError(
        f"checkpoint {path} not written: {why} ({type(exc).__name__}: {exc}; {written / _MB:.1f} MB "
        f"written before it stopped, {space}). The file under that name is unchanged (the partial "
        "copy was removed). Free some space or use another --output-dir, then run the same command "
        "again to continue from the last checkpoint."
    )


def save_atomically(original, obj, f, *args, **kwargs):
    """torch.save(obj, f) through a temporary file and a rename when f is a path; as is otherwise."""
    if not isinstance(f, (str, os.PathLike)):
        return original(obj, f, *args, **kwargs)
    path = os.fspath(f)
    tmp = temp_name(path)
    try:
        original(obj, tmp, *args, **kwargs)
        _fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        error = _failure(path, tmp, exc)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, Exception):
            raise error from exc
        raise
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a folder
        _fsync_path(os.path.dirname(os.path.abspath(path)), directory=True)
    return None


def install() -> str:
    """Make torch.save atomic in this process (FunASR's trainer and averaging call torch.save)."""
    import torch

    if getattr(torch.save, "ftenv_atomic", False):
        return "checkpoints: already atomic"
    wrapped = functools.partial(save_atomically, torch.save)
    wrapped.ftenv_atomic = True  # type: ignore[attr-defined]
    torch.save = wrapped
    return "checkpoints: written to a temporary name, synced, then renamed (no cut file on a crash)"
