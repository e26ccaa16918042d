"""Every file the trainer saves with torch.save is written whole or not at all (a temporary name,
fsync, rename, fsync of the folder), because the pinned FunASR saves checkpoints in place and a cut
file under the final name makes every restart fail in torch.load.
"""

from __future__ import annotations

import contextlib
import functools
import os

from ftenv.trainer.runlife.record import temp_name

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
