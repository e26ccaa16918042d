"""How long an audio file is and whether the trainer can decode it, as FunASR's loader
(funasr/utils/load_utils.py) would: a plain WAV from its header alone (fast), anything else
through libsndfile, then ffprobe. A WAV cut short is named as truncated, since libsndfile would
quietly read what is there.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
from dataclasses import dataclass

#: Bytes read to find a WAV's data chunk (headers with LIST/INFO chunks are a few hundred).
WAV_HEAD = 4096
FFPROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class AudioDuration:
    """seconds is None when the file is unusable; problem then says why (one sentence)."""

    seconds: float | None
    problem: str | None = None


#: WAV format tags whose duration is data bytes / block align / rate (PCM, IEEE float, extensible).
_PLAIN_WAV = (1, 3, 0xFFFE)


def _plain_wav(head: bytes, size: int) -> AudioDuration | None:
    """A RIFF/WAVE file of plain samples read from its header alone (no decoder needed: its samples
    are the bytes), or None for anything else (then libsndfile reads it). A data chunk that
    declares more bytes than the file holds is a copy cut short."""
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    at, fmt = 12, None
    while at + 8 <= len(head):
        chunk, length = head[at : at + 4], struct.unpack_from("<I", head, at + 4)[0]
        if chunk == b"fmt " and at + 24 <= len(head):
            fmt = struct.unpack_from("<HHIIH", head, at + 8)  # tag, channels, rate, bytes/s, block align
        elif chunk == b"data":
            if fmt is None or fmt[0] not in _PLAIN_WAV or length in (0, 0xFFFFFFFF):
                return None
            _tag, channels, rate, _bps, align = fmt
            if not channels or not rate or not align:
                return AudioDuration(None, "the WAV header gives no channels, sample rate or block size")
            missing = at + 8 + length - size
            if missing > 0:
                return AudioDuration(
                    None,
                    f"truncated: the WAV header declares {missing} more bytes of audio than the file holds "
                    "(an interrupted copy?)",
                )
            return AudioDuration(length // align / rate)
        at += 8 + length + (length & 1)
    return None


def _ffprobe(path: str) -> AudioDuration:
    tool = shutil.which("ffprobe")
    if tool is None:
        return AudioDuration(None, "libsndfile cannot open it and ffmpeg (ffprobe) is not installed")
    cmd = [tool, "-v", "error", "-show_entries", "format=duration", "-of", "default=nw=1:nk=1", path]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=FFPROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return AudioDuration(None, f"ffprobe failed: {exc}")
    try:
        seconds = float(out.stdout.strip().splitlines()[0])
    except (IndexError, ValueError):
        why = (out.stderr.strip().splitlines() or ["no duration"])[-1]
        return AudioDuration(None, f"neither libsndfile nor ffmpeg can decode it ({why})")
    return AudioDuration(seconds)


def read_duration(path: str) -> AudioDuration:
    """The duration of the audio at `path` (a header read), or why the trainer could not use it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return AudioDuration(None, "audio file not found")
    except OSError as exc:
        return AudioDuration(None, f"audio file not readable: {exc.strerror}")
    if not stat.S_ISREG(info.st_mode):
        return AudioDuration(None, "audio path is not a file")
    if info.st_size == 0:
        return AudioDuration(None, "audio file is empty (0 bytes)")
    try:
        with open(path, "rb") as fh:
            head = fh.read(WAV_HEAD)
    except OSError as exc:
        return AudioDuration(None, f"audio file not readable: {exc.strerror}")
    found = _plain_wav(head, info.st_size)
    return found if found is not None else _libsndfile(path)


def _libsndfile(path: str) -> AudioDuration:
    import soundfile

    try:
        with soundfile.SoundFile(path) as f:
            frames, rate = f.frames, f.samplerate
            f.read(min(frames, 1024), dtype="float32")  # the decoder starts: not just a header
    except (soundfile.LibsndfileError, RuntimeError, OSError):
        return _ffprobe(path)
    if rate <= 0:
        return AudioDuration(None, "the header gives no sample rate")
    return AudioDuration(frames / rate)
