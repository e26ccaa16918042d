"""Reading a manifest line by line as FunASR does (UTF-8, one JSON object a line), in chunks that
worker processes check in parallel: the per-line work of `ftenv data check`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import audio, chatml, paths

#: Lines per chunk handed to a worker.
CHUNK_LINES = 512
#: How far the declared speech_length may be from the audio's real frame count: frame
#: conventions differ by a few frames (kaldi's snip_edges, rounding), a wrong unit by far more.
TOLERANCE_FRAMES = 10
TOLERANCE_SHARE = 0.1
#: The same for text_length against the model's tokenizer (`ftenv data prepare` writes the count
#: exactly; another tokenizer or a count of characters is off by more).
TOLERANCE_TOKENS = 2

# What a line's content and audio can be found to be (the report's codes; the line's reading: chatml's).
AUDIO, EMPTY_TEXT, LENGTH_MISMATCH = "audio_unusable", "empty_transcript", "speech_length_mismatch"
TEXT_MISMATCH = "text_length_mismatch"
#: The model's tokenizer when the check has one (`ftenv data check --model-dir`): set before the
#: worker processes fork, so that each has it without pickling it per chunk.
TOKENIZER = None


@dataclass
class LineResult:
    """One line's facts; `problem` is the first error found (code, sentence), or None."""

    number: int
    problem: tuple[str, str] | None = None
    text_problem: tuple[str, str] | None = None  # text_length against the tokenizer: a warning
    blank: bool = False
    audio: str | None = None  # absolute path as the trainer would open it
    speech_length: int | None = None
    text_length: int | None = None
    seconds: float | None = None


def chunks(path: Path) -> Iterator[list[tuple[int, bytes]]]:
    """(line number, raw bytes) in chunks, read as a stream (bytes: a bad byte is a finding, not a crash)."""
    chunk: list[tuple[int, bytes]] = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            chunk.append((number, raw))
            if len(chunk) >= CHUNK_LINES:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def check_line(
    number: int, raw: bytes, base: str, read_audio: bool = True, manifest_dir: str | None = None
) -> LineResult:
    result = LineResult(number)
    utt = chatml.read_line(raw)
    if isinstance(utt, chatml.Unreadable):
        result.blank = utt.code == chatml.BLANK
        result.problem = None if result.blank else (utt.code, utt.message)
        return result
    result.speech_length, result.text_length = utt.speech_length, utt.text_length
    if not utt.text.strip():
        result.problem = (
            EMPTY_TEXT,
            "empty transcript: FunASR keeps the line and trains the model to say nothing for this audio",
        )
    elif TOKENIZER is not None:
        tokens = chatml.text_lengths(TOKENIZER, [utt.text])[0]
        if abs(tokens - utt.text_length) > max(TOLERANCE_TOKENS, TOLERANCE_SHARE * tokens):
            result.text_problem = (
                TEXT_MISMATCH,
                f"text_length {utt.text_length} but the transcript is {tokens} tokens of the model's "
                "tokenizer: FunASR batches and drops by the declared length; `ftenv data prepare` "
                "writes it from the transcript",
            )
    if utt.audio.startswith(paths.URLS):
        return result
    result.audio = paths.trainer_path(utt.audio, base)
    if not read_audio:
        return result
    found = audio.read_duration(result.audio)
    if found.seconds is None:
        misread = manifest_dir and paths.trainer_problem(utt.audio, Path(base), Path(manifest_dir))
        result.problem = result.problem or (
            AUDIO,
            f"{misread or f'{utt.audio}: {found.problem}'}; FunASR would replace this sample with a random "
            "other one, with only a warning",
        )
        return result
    result.seconds = found.seconds
    frames = chatml.speech_frames(found.seconds)
    if abs(frames - utt.speech_length) > max(TOLERANCE_FRAMES, TOLERANCE_SHARE * frames):
        result.problem = result.problem or (
            LENGTH_MISMATCH,
            f"speech_length {utt.speech_length} but {utt.audio} lasts {found.seconds:.2f} s ({frames} "
            "frames of 10 ms): FunASR batches and drops by the declared length; `ftenv data prepare` "
            "writes it from the audio",
        )
    return result


def check_chunk(
    chunk: list[tuple[int, bytes]], base: str, read_audio: bool = True, manifest_dir: str | None = None
) -> list[LineResult]:
    """A worker's job: every line of the chunk."""
    return [check_line(number, raw, base, read_audio, manifest_dir) for number, raw in chunk]
