"""`ftenv finetune`'s first look at a ChatML line judges it as `ftenv data check` does: one rule
(ftenv.data.chatml), the same verdict and the same sentence for the same line."""

from __future__ import annotations

import json

import pytest

from ftenv.data import lines
from ftenv.train.inputs import check_line
from support import GOOD_RECORD


def _with(**changes) -> str:
    item = json.loads(json.dumps(GOOD_RECORD))
    for key, value in changes.items():
        if value is None:
            item.pop(key)
        else:
            item[key] = value
    return json.dumps(item, ensure_ascii=False)


def _messages(*messages: dict) -> str:
    return _with(messages=list(messages))


SYSTEM, USER, ASSISTANT = GOOD_RECORD["messages"]

#: (what the line is, the line, whether FunASR's index reads it as a usable utterance).
LINES = [
    ("the good line", _with(), True),
    # FunASR's index converts the declared lengths with int(): these pass there.
    ("a length written as a string", _with(speech_length="145"), True),
    ("a length written as a float", _with(speech_length=145.0), True),
    ("a length in a list", _with(text_length=[3]), True),
    ("a length int() refuses", _with(speech_length="145.5"), False),
    ("a length that is not a number", _with(text_length="abc"), False),
    ("no speech_length", _with(speech_length=None), False),
    ("an unknown role", _messages(SYSTEM, USER, ASSISTANT, {"role": "tool", "content": "x"}), False),
    ("the transcript not a string", _messages(SYSTEM, USER, {"role": "assistant", "content": ["x"]}), False),
    ("not JSON", '{"messages": [}', False),
    ("a JSON list", "[1, 2]", False),
    ("FunASR's source/target format", '{"key": "a", "source": "a.wav", "target": "hi"}', False),
    ("no messages", _with(messages=[]), False),
    ("a message without content", _messages({"role": "user"}), False),
    ("no user message", _messages(SYSTEM, ASSISTANT), False),
    ("no assistant message", _messages(SYSTEM, USER), False),
    ("no speech marks", _messages(SYSTEM, {"role": "user", "content": "wav/a.wav"}, ASSISTANT), False),
]


@pytest.mark.parametrize(("line", "usable"), [x[1:] for x in LINES], ids=[x[0] for x in LINES])
def test_finetune_and_data_check_judge_a_line_alike(work, line, usable):
    finetune = check_line(line, work)
    found = lines.check_line(1, f"{line}\n".encode(), str(work), read_audio=False)
    data_check = found.problem[1] if found.problem else None
    assert finetune == data_check
    assert (finetune is None) == usable, finetune
