"""Audio that must be written out before FunASR can open it: segments cut from their recordings and
the output of wav.scp commands (`sox ... |`), each utterance one 16-bit PCM WAV under the folder the
user names, written by libsndfile (the same input gives the same bytes), one recording per worker.
"""

from __future__ import annotations

import io
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import writes
from ftenv.data.rows import Rejected, Row
from ftenv.data.workers import parallel_map

#: A segment may end this much after its recording and is cut at the end (Kaldi's extract-segments'
#: --max-overshoot default); further is an error.
MAX_OVERSHOOT_S = 0.5
COMMAND_TIMEOUT_S = 3600
SUBTYPE = "PCM_16"


@dataclass(frozen=True)
class Cut:
    key: str
    out: str
    start: float | None
    end: float | None
    channel: int | None


@dataclass(frozen=True)
class Job:
    """One recording (a file or a command) and the utterances written from it."""

    audio: str
    command: str | None
    cuts: tuple[Cut, ...]


def file_name(key: str) -> str:
    """The file the utterance `key` is written to (a key's slashes would make folders: they become
    __; two keys that meet here are refused by ftenv.data.prepare.checked_keys)."""
    return f"{key.replace('/', '__')}.wav"


def out_path(folder: Path, key: str) -> str:
    """Where the utterance `key` is written."""
    return os.path.abspath(folder / file_name(key))


def _read(job: Job):
    """(samples as int16 [frames, channels], rate) of the whole recording, or why not."""
    import soundfile

    if job.command is None:
        source = job.audio
    else:
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", job.command], capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the command `{job.command}` did not run: {exc}"
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"the command `{job.command}` exited {done.returncode}" + (f": {said[-1]}" if said else "")
        source = io.BytesIO(done.stdout)
    try:
        data, rate = soundfile.read(source, dtype="int16", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, OSError) as exc:
        what = f"the output of `{job.command}`" if job.command else job.audio
        return f"libsndfile cannot read {what}: {exc}"
    return data, rate


def _one(data, rate: int, cut: Cut):
    """The samples of one utterance, or why not (sample positions rounded from the seconds)."""
    frames = data.shape[0]
    first = 0 if cut.start is None else round(cut.start * rate)
    last = frames if cut.end in (None, -1) else round(cut.end * rate)
    if first >= frames:
        return f"the segment starts at {cut.start} s, after the recording's end ({frames / rate:.2f} s)"
    if last > frames:
        if last - frames > MAX_OVERSHOOT_S * rate:
            return f"the segment ends at {cut.end} s, after the recording's end ({frames / rate:.2f} s)"
        last = frames
    if cut.channel is not None:
        if cut.channel >= data.shape[1]:
            return f"channel {cut.channel} asked for, the recording has {data.shape[1]}"
        return data[first:last, cut.channel]
    if cut.start is not None and data.shape[1] > 1:
        return f"the recording has {data.shape[1]} channels: give the channel as the segment's 5th field"
    return data[first:last]


def write_job(job: Job) -> list[tuple[str, str | None]]:
    """(key, problem or None) per utterance of the job, each written to its file (no half file)."""
    import soundfile

    whole = _read(job)
    if isinstance(whole, str):
        return [(cut.key, whole) for cut in job.cuts]
    data, rate = whole
    out = []
    for cut in job.cuts:
        samples = _one(data, rate, cut)
        if isinstance(samples, str):
            out.append((cut.key, samples))
            continue
        try:
            with writes.written_whole(cut.out, binary=True) as fh:
                soundfile.write(fh, samples, rate, subtype=SUBTYPE, format="WAV")
        except (soundfile.LibsndfileError, RuntimeError, OSError) as exc:
            out.append((cut.key, f"cannot write {cut.out}: {exc}"))
            continue
        out.append((cut.key, None))
    return out


def write_out(rows: list[Row], folder: Path, jobs: int, rejected: list[Rejected]) -> list[Row]:
    """The rows with their audio written out under `folder` where needed, in the same order; a row
    whose audio could not be written goes to `rejected`."""
    folder.mkdir(parents=True, exist_ok=True)
    grouped: dict[tuple[str, str | None], list[Cut]] = {}
    for row in rows:
        if row.needs_writing:
            cut = Cut(row.key, out_path(folder, row.key), row.start, row.end, row.channel)
            grouped.setdefault((row.audio, row.command), []).append(cut)
    work = [Job(audio, command, tuple(cuts)) for (audio, command), cuts in grouped.items()]
    problems = {}
    for result in parallel_map(write_job, work, jobs, "audio written", unit="recording"):
        problems.update(result)
    kept = []
    for row in rows:
        if not row.needs_writing:
            kept.append(row)
        elif problems[row.key] is not None:
            rejected.append(Rejected(row.source, row.line, row.key, problems[row.key]))
        else:
            row.audio, row.command = out_path(folder, row.key), None
            row.start = row.end = row.channel = None
            kept.append(row)
    return kept
