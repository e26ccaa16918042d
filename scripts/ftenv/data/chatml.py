"""Upstream's ChatML JSONL line for Fun-ASR-Nano (FunASR's
examples/industrial_data_pretraining/fun_asr_nano): the one home of its prompts, its speech
marker, how a line is built and how one is read back.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

SYSTEM_PROMPT = "You are a helpful assistant."
USER_PROMPT = "语音转写："
SPEECH_MARK = ("<|startofspeech|>", "<|endofspeech|>")
#: The key of a line's speaker (not upstream's: FunASR ignores it).
SPEAKER_KEY = "speaker"
#: fbank frames per second: FunASR's frontends shift 10 ms.
FRAMES_PER_SECOND = 100
#: The largest length a line may declare (10^12 frames are 300 years): beyond it, a wrong number,
#: and one that sums and divides as a float without overflow.
MAX_LENGTH = 10**12


def speech_frames(seconds: float) -> int:
    """speech_length for audio of this duration: 10 ms fbank frames, as upstream's scp2jsonl counts
    them (samples * 1000 / fs / 10, rounded down)."""
    return math.floor(seconds * FRAMES_PER_SECOND + 1e-6)


def text_lengths(tokenizer, texts: list[str]) -> list[int]:
    """text_length of each transcript: its tokens by the model's own tokenizer (what `ftenv data
    prepare` writes and `ftenv data check --model-dir` compares)."""
    return [len(ids) for ids in tokenizer(texts)["input_ids"]] if texts else []


def record(
    key: str | None, audio: str, text: str, speech_length: int, text_length: int, speaker: str | None = None
) -> dict:
    """One utterance in upstream's format, keys in a fixed order (the same input gives the same bytes);
    the speaker, when known, in a key FunASR ignores (`ftenv data split` reads it). No key (None):
    the example line that messages show."""
    start, end = SPEECH_MARK
    item = {
        "key": key,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"{USER_PROMPT}{start}!{audio}{end}"},
            {"role": "assistant", "content": text},
        ],
        "speech_length": speech_length,
        "text_length": text_length,
    }
    if key is None:
        del item["key"]
    if speaker is not None:
        item[SPEAKER_KEY] = speaker
    return item


def dumps(item: dict) -> str:
    return json.dumps(item, ensure_ascii=False)


#: One line of the format, as the messages about a wrong line show it.
EXAMPLE_LINE = dumps(record(None, "/data/wav/utt1.wav", "几点了？", 145, 3))


@dataclass(frozen=True)
class Utterance:
    """What a line declares: the audio path as written, the transcript, the two lengths, its key
    and its speaker (SPEAKER_KEY)."""

    audio: str
    text: str
    speech_length: int
    text_length: int
    key: str | None = None
    speaker: str | None = None


#: What a JSONL line can be found to be before its audio is read (the data check report's codes).
BLANK, NOT_UTF8, NOT_JSON, SHAPE = "blank_line", "not_utf8", "not_json", "not_chatml"
BLANK_MESSAGE = "empty line: FunASR logs a JSON error and skips it"


@dataclass(frozen=True)
class Unreadable:
    """A line FunASR cannot use: its code and one sentence. A blank line is one (FunASR's index
    reads it with json.loads, logs the error and skips it): a warning, never an error."""

    code: str
    message: str


def read_line(raw: bytes) -> Utterance | Unreadable:
    """One JSONL line as FunASR's index reads it (UTF-8, one JSON object): the one reader of
    `ftenv data check`, `ftenv finetune`'s first look, `ftenv data split` and `ftenv eval`'s test
    set. A number Python's json cannot hold (more than 4300 digits) and nesting deeper than its
    recursion limit are named lines too, never a crash."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Unreadable(
            NOT_UTF8,
            f"not UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line): FunASR reads "
            "the file as UTF-8 and every rank stops at dataset build; re-encode the file "
            "(e.g. `iconv -f GBK -t UTF-8`) or fix the line",
        )
    if not text.strip():
        return Unreadable(BLANK, BLANK_MESSAGE)
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:  # FunASR's index logs it and skips the line
        return Unreadable(NOT_JSON, f"not valid JSON ({exc.msg} at column {exc.colno}): FunASR drops it")
    except RecursionError:
        return Unreadable(NOT_JSON, "not usable JSON (nested deeper than a reader follows): FunASR drops it")
    except ValueError as exc:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        return Unreadable(NOT_JSON, f"not usable JSON ({exc}): FunASR drops it")
    utt = parse(item)
    return Unreadable(SHAPE, utt) if isinstance(utt, str) else utt


def _length(item: dict, key: str) -> int | str:
    """The declared length as FunASR reads it (a list holds it in its first element), or why not."""
    value = item.get(key)
    if isinstance(value, list) and value:
        value = value[0]
    if value is None:
        return f"no {key}: FunASR reads it as 0 and drops the line"
    shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
    try:
        number = int(value)  # FunASR's own conversion: "145" and 145.0 pass, "abc" and null do not
    except (TypeError, ValueError, OverflowError):  # OverflowError: Infinity, 1e999
        return f"{key} {shown} is not an integer: FunASR's int() fails and every rank stops at dataset build"
    if abs(number) > MAX_LENGTH:
        return f"{key} {shown} is not a length (more than {MAX_LENGTH:.0e}): write it from the data"
    return number


def parse(item) -> Utterance | str:
    """The utterance a decoded JSON line declares, or what is wrong with it (one sentence)."""
    if not isinstance(item, dict):
        return f"a JSON {type(item).__name__}, expected an object with 'messages'"
    if "messages" not in item:
        keys = ", ".join(sorted(item)) or "none"
        hint = (
            ": this looks like FunASR's source/target format (Paraformer, SenseVoice), not "
            "Fun-ASR-Nano's ChatML messages (`ftenv data prepare` writes them)"
            if {"source", "target"} & set(item)
            else ""
        )
        return f"no 'messages' key (keys: {keys}){hint}; FunASR stops every rank at dataset build"
    messages = item["messages"]
    if not isinstance(messages, list) or not messages:
        return '\'messages\' must be a non-empty list of {"role": ..., "content": ...}'
    roles = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
            return f"messages[{i}] must be an object with 'role' and 'content'"
        roles.append(msg["role"])
    unknown = sorted({str(r) for r in roles} - {"system", "user", "assistant"})
    if unknown:
        return f"unknown role(s) {', '.join(unknown)}: FunASR ignores them (roles: system, user, assistant)"
    user = next((m["content"] for m in messages if m["role"] == "user"), None)
    if user is None:
        return f"no message with role 'user' (roles: {', '.join(map(str, roles))})"
    answer = next((m["content"] for m in messages if m["role"] == "assistant"), None)
    if answer is None:
        return (
            f"no message with role 'assistant' holding the transcript (roles: {', '.join(map(str, roles))})"
        )
    start, end = SPEECH_MARK
    if not isinstance(user, str) or start not in user or end not in user:
        return f"the user message has no {start}!/path/to/audio.wav{end}"
    audio = user.split(start, 1)[1].split(end, 1)[0]
    if not audio.startswith("!"):
        return f"the audio path must follow {start} with '!' ({start}!/path/x.wav{end}), got {audio!r}"
    if not isinstance(answer, str):
        return f"the assistant message's content must be the transcript text, got {type(answer).__name__}"
    lengths = [_length(item, key) for key in ("speech_length", "text_length")]
    for value in lengths:
        if isinstance(value, str):
            return value
    key, speaker = item.get("key"), item.get(SPEAKER_KEY)
    return Utterance(
        audio[1:],
        answer,
        *lengths,
        key=None if key in (None, "") else str(key),
        speaker=None if speaker is None else str(speaker),
    )
