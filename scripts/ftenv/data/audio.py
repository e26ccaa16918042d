"""How long an audio file is and whether the trainer can decode it, from its header: what FunASR's
loader (funasr/utils/load_utils.py) would read. FunASR tries torchaudio, then soundfile
(libsndfile: WAV, FLAC, OGG/Opus, MP3), then the ffmpeg program; the image's torchaudio has no
decoder backend, so soundfile is read first here and ffprobe (from the image's ffmpeg) only for
what libsndfile cannot open. A WAV whose header promises more data than the file holds (a copy cut
short) is named as truncated: libsndfile would quietly read what is there."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from dataclasses import dataclass

#: Bytes of a WAV read to find its data chunk (headers with LIST/INFO chunks are a few hundred).
WAV_HEAD = 4096
FFPROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class Probe:
    """seconds is None when the file is unusable; problem then says why (one sentence)."""

    seconds: float | None
    problem: str | None = None
    decoder: str = "soundfile"


def _wav_shortfall(path: str, size: int) -> int:
    """Bytes a RIFF/WAVE file's data chunk declares beyond the end of the file (0: complete, or
    not a WAV whose sizes can be trusted, such as a stream written with size 0 or 0xFFFFFFFF)."""
    with open(path, "rb") as fh:
        head = fh.read(WAV_HEAD)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return 0
    at = 12
    while at + 8 <= len(head):
        chunk, length = head[at : at + 4], struct.unpack_from("<I", head, at + 4)[0]
        if chunk == b"data":
            if length in (0, 0xFFFFFFFF):
                return 0
            return max(0, at + 8 + length - size)
        at += 8 + length + (length & 1)
    return 0


def _ffprobe(path: str) -> Probe:
    tool = shutil.which("ffprobe")
    if tool is None:
        return Probe(None, "libsndfile cannot open it and ffmpeg (ffprobe) is not installed", "none")
    cmd = [tool, "-v", "error", "-show_entries", "format=duration", "-of", "default=nw=1:nk=1", path]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=FFPROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(None, f"ffprobe failed: {exc}", "ffmpeg")
    try:
        seconds = float(out.stdout.strip().splitlines()[0])
    except (IndexError, ValueError):
        why = (out.stderr.strip().splitlines() or ["no duration"])[-1]
        return Probe(None, f"neither libsndfile nor ffmpeg can decode it ({why})", "ffmpeg")
    return Probe(seconds, None, "ffmpeg")


def probe(path: str) -> Probe:
    """The duration of the audio at `path` (a header read), or why the trainer could not use it."""
    import soundfile

    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return Probe(None, "audio file not found")
    except OSError as exc:
        return Probe(None, f"audio file not readable: {exc.strerror}")
    if not os.path.isfile(path):
        return Probe(None, "audio path is not a file")
    if size == 0:
        return Probe(None, "audio file is empty (0 bytes)")
    try:
        with soundfile.SoundFile(path) as f:
            frames, rate, container = f.frames, f.samplerate, f.format
            f.read(min(frames, 1024), dtype="float32")  # the decoder starts: not just a header
    except PermissionError as exc:
        return Probe(None, f"audio file not readable: {exc.strerror}")
    except (soundfile.LibsndfileError, RuntimeError, OSError):
        return _ffprobe(path)
    if rate <= 0:
        return Probe(None, "the header gives no sample rate")
    if container in ("WAV", "WAVEX"):
        missing = _wav_shortfall(path, size)
        if missing:
            return Probe(
                None,
                f"truncated: the WAV header declares {missing} more bytes of audio than the file holds "
                "(an interrupted copy?)",
            )
    return Probe(frames / rate)
