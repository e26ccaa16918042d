"""`ftenv finetune`'s first look at a ChatML line judges it as `ftenv data check` does: one rule
(ftenv.data.chatml), the same verdict and the same sentence for the same line; a blank line and a
list of data files (ftenv.data.lists) read alike too."""

from __future__ import annotations

import json

import pytest

from ftenv import cli
from ftenv.data import chatml, check, lines, lists
from ftenv.data.rules import LengthRules
from ftenv.launch import inputs
from ftenv.launch.inputs import check_line
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


def test_a_blank_line_is_skipped_by_finetune_and_a_warning_of_the_data_check(work, capsys):
    """FunASR's index reads a blank line with json.loads, logs the error and skips it: finetune's
    first look lets it pass, `ftenv data check` names it as a warning, neither refuses the file."""
    good = (work / "train.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (work / "train.jsonl").write_text(f"{good}\n\n{good}\n", encoding="utf-8")
    assert check_line("\n", work) is None
    assert inputs.check_jsonl(work / "train.jsonl", "train", work) == []
    found = lines.check_line(2, b"\n", str(work), read_audio=False)
    assert found.blank and found.problem is None
    report = check.check([(work / "train.jsonl", check.TRAIN)], LengthRules(), work, jobs=1, read_audio=False)
    blank = [f for f in report.findings if f.code == chatml.BLANK]
    assert [(f.line, f.severity) for f in blank] == [(2, "warning")]


def test_a_list_of_data_files_is_read_alike_every_line_whole(work, capsys):
    """A data argument not named *.jsonl lists JSONL files, one a line, each line stripped as FunASR
    opens it: finetune's first look and `ftenv data check` read every listed file, a path with a
    space included, and both refuse a blank line of the list."""
    spaced = work / "my data" / "part two.jsonl"
    spaced.parent.mkdir()
    spaced.write_text('{"messages": [}\n', encoding="utf-8")
    listing = work / "train.list"
    listing.write_text(f"train.jsonl\n  {spaced}  \n", encoding="utf-8")
    assert lists.manifests(str(listing), work) == [work / "train.jsonl", spaced]
    problems = inputs.check_jsonl(listing, "train", work)
    assert problems[0].startswith(f"train data {spaced} line 1: not valid JSON"), problems
    assert cli.main(["data", "check", "--jobs", "1", "--output-dir", str(work / "out"), str(listing)]) == 2
    assert f"{spaced} line 1: not valid JSON" in capsys.readouterr().err
    listing.write_text(f"train.jsonl\n\n{spaced}\n", encoding="utf-8")
    blank = f"{listing} line 2 is blank"
    assert blank in inputs.check_jsonl(listing, "train", work)[0]
    assert cli.main(["data", "check", "--jobs", "1", str(listing)]) == 2
    assert blank in capsys.readouterr().err


def test_a_data_file_is_told_from_a_list_by_the_end_of_its_name_as_funasr_tells_it(work):
    """FunASR takes a name ending in .jsonl or .json as the data (`path.endswith`), a hidden file
    named `.jsonl` included: the checks and the trainer's data-loss count read it as FunASR does."""
    from ftenv.data import runtime

    hidden = work / ".jsonl"
    hidden.write_text("{}\n{}\n", encoding="utf-8")
    assert not lists.is_list(hidden) and lists.is_list(work / "train.list")
    assert lists.manifests(str(hidden), work) == [hidden]
    assert runtime._lines(hidden) == 2 and runtime._lines(work / "train.list") is None
