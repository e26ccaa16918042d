"""`ftenv eval` refuses, before anything is built or decoded, an --out it cannot write or one that
is or lies inside what it evaluates, and reads every test-set line as the data commands do: a key
a `key<TAB>text` line cannot carry, a length of any size or JSON nested too deep is a named line
(exit 2), never an internal error. Nothing it reads changes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftenv import cli
from ftenv.evaluate import decode, models
from ftenv.outcome import UNUSABLE
from ftenv.selfcheck import tinymodel
from support.checksums import sums


@pytest.fixture
def no_decoding(monkeypatch):
    """Building a model is the first work after the checks: reaching it fails the test."""

    def build(*args, **kwargs):
        raise AssertionError("a model was built: the refusal came after the work")

    monkeypatch.setattr(decode, "build", build)


def _eval(test: Path, model: Path, out: Path) -> int:
    return cli.main(["eval", str(test), str(model), "--out", str(out), "--device", "cpu"])


def test_an_out_that_is_a_file_is_refused_before_decoding(tiny, tmp_path, capsys, no_decoding):
    taken = tmp_path / "results"
    taken.write_text("mine")
    assert _eval(tinymodel.paths(tiny).val_jsonl, tiny, taken) == UNUSABLE
    assert f"--out: {taken} exists and is not a folder" in capsys.readouterr().err
    assert taken.read_text() == "mine"


@pytest.mark.parametrize("inside", ["", "data", "eval"])
def test_an_out_in_the_model_folder_is_refused(tiny, tmp_path, capsys, no_decoding, inside):
    before = sums(tiny)
    out = tiny / inside if inside else tiny
    assert _eval(tinymodel.paths(tiny).val_jsonl, tiny, out) == UNUSABLE
    err = capsys.readouterr().err
    assert f"--out {out} {'is' if not inside else 'lies inside'} the model {tiny}" in err
    assert sums(tiny) == before and not (tiny / "eval").exists()


def _test_set(tiny: Path, tmp_path: Path, change) -> Path:
    first = json.loads(tinymodel.paths(tiny).val_jsonl.read_text().splitlines()[0])
    test = tmp_path / "test.jsonl"
    test.write_text(json.dumps(first, ensure_ascii=False) + "\n" + change(first) + "\n", encoding="utf-8")
    return test


@pytest.mark.parametrize(
    "change",
    [
        lambda item: json.dumps({**item, "key": "call 1"}),
        lambda item: json.dumps({**item, "key": "tab\there"}),
        lambda item: json.dumps({**item, "speech_length": 0}).replace(
            '"speech_length": 0', '"speech_length": 1e999'
        ),
        lambda item: json.dumps({**item, "speech_length": 0}).replace(
            '"speech_length": 0', '"speech_length": Infinity'
        ),
        lambda item: json.dumps({**item, "speech_length": 0}).replace(
            '"speech_length": 0', f'"speech_length": {"9" * 5000}'
        ),
        lambda item: "[" * 200_000 + "]" * 200_000,
    ],
    ids=["space-key", "tab-key", "1e999", "Infinity", "5000-digits", "deep"],
)
def test_every_bad_line_is_named(tiny, tmp_path, change):
    test = _test_set(tiny, tmp_path, change)
    with pytest.raises(models.TestSetError, match="line 2"):
        models.read_test_set(test)


def test_a_relative_path_found_only_beside_the_test_set_is_named_as_data_check_names_it(
    tiny, tmp_path, monkeypatch
):
    """`ftenv data check` refuses a JSONL's relative path that only the list's folder has (FunASR
    opens it from the working directory); eval reads the same file the same way."""
    line = tinymodel.paths(tiny).val_jsonl.read_text(encoding="utf-8").splitlines()[0]
    wav = json.loads(line)["messages"][1]["content"].split("!", 1)[1].split("<|endofspeech|>")[0]
    lists = tmp_path / "lists"
    lists.mkdir()
    shutil.copy(wav, lists / "a.wav")
    test = lists / "test.jsonl"
    test.write_text(line.replace(wav, "a.wav") + "\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(
        models.TestSetError, match=r"line 1: a\.wav is not in the trainer's working directory"
    ):
        models.read_test_set(test)
    monkeypatch.chdir(lists)
    assert [u.audio for u in models.read_test_set(test)] == [str(lists / "a.wav")]
