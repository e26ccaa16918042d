"""What `ftenv data prepare`, `check` and `split` read they never destroy or corrupt (FunASR-free,
on the tiny model's tokenizer): an output over an input refused before any work with both paths
named, no temporary file written through a link, one key per audio file and per line, and bad
input exit 2 with its line, never an internal error. Every input's checksum is the same after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftenv import cli
from ftenv.data import check
from ftenv.outcome import UNUSABLE
from support.checksums import sums
from support.training_data import line, wav


def _prepare(tiny: Path, out: Path, *args: str) -> int:
    return cli.main(["data", "prepare", *args, "--model-dir", str(tiny), "-o", str(out), "--jobs", "1"])


def _kaldi(root: Path, keys: dict[str, str], segments: dict[str, str] | None = None) -> Path:
    """A data folder: wav.scp of a 1 s recording per key (or per recording of `segments`), text."""
    data = root / "data"
    data.mkdir(parents=True)
    recordings = sorted(set((segments or {}).values())) if segments else list(keys)
    scp = [f"{r} {wav(root / 'wav' / f'{r}.wav', 1.0)}" for r in recordings]
    (data / "wav.scp").write_text("\n".join(scp) + "\n")
    (data / "text").write_text("".join(f"{k} {t}\n" for k, t in keys.items()))
    if segments:
        (data / "segments").write_text("".join(f"{k} {r} 0.1 0.5\n" for k, r in segments.items()))
    return data


@pytest.mark.parametrize("name", ["wav.scp", "text"])
def test_prepare_never_writes_over_its_lists(tiny, tmp_path, capsys, name):
    data = _kaldi(tmp_path, {"utt1": "ni hao"})
    before = sums(tmp_path)
    assert _prepare(tiny, data / name, "--wav-scp", str(data)) == UNUSABLE
    err = capsys.readouterr().err
    assert f"-o {data / name} is the list {data / name}:" in err and "choose another -o" in err
    assert sums(tmp_path) == before


def test_audio_out_never_writes_over_the_recordings_it_cuts(tiny, tmp_path, capsys):
    """The usual Kaldi layout for whole-file segments: a segment id equal to its recording's stem,
    --audio-out the corpus's own audio folder. rec1.wav was replaced by its 0.4 s segment, exit 0."""
    data = _kaldi(tmp_path, {"rec1": "ni hao"}, segments={"rec1": "rec1"})
    before = sums(tmp_path)
    argv = ["--wav-scp", str(data), "--audio-out", str(tmp_path / "wav")]
    assert _prepare(tiny, tmp_path / "train.jsonl", *argv) == UNUSABLE
    err = capsys.readouterr().err
    assert f"rec1's audio {tmp_path / 'wav' / 'rec1.wav'} is rec1's recording" in err
    assert sums(tmp_path) == before and not (tmp_path / "train.jsonl").exists()


def test_no_temporary_file_is_written_through_a_link(tiny, tmp_path, capsys):
    """A link where a fixed temporary name would be (KEY.wav.tmp, OUT.tmp) points at a file of the
    user's: it stays as it is, and the outputs are written whole."""
    data = _kaldi(tmp_path, {"utt1": "ni hao"}, segments={"utt1": "rec"})
    victim = tmp_path / "precious.txt"
    victim.write_text("mine")
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "utt1.wav.tmp").symlink_to(victim)
    (tmp_path / "train.jsonl.tmp").symlink_to(victim)
    assert _prepare(tiny, tmp_path / "train.jsonl", "--wav-scp", str(data), "--audio-out", str(cut)) == 0
    assert victim.read_text() == "mine"
    assert [json.loads(x)["key"] for x in (tmp_path / "train.jsonl").read_text().splitlines()] == ["utt1"]
    assert sorted(p.name for p in cut.iterdir()) == ["utt1.wav", "utt1.wav.tmp"]  # no temporary left


def test_two_keys_never_share_an_audio_file(tiny, tmp_path, capsys):
    """`a/b` and `a__b` both mapped to a__b.wav: one transcript trained on the other's audio."""
    data = _kaldi(tmp_path, {"a/b": "ni hao", "a__b": "zai jian"}, segments={"a/b": "rec", "a__b": "rec"})
    before = sums(data)
    out = tmp_path / "train.jsonl"
    assert _prepare(tiny, out, "--wav-scp", str(data), "--audio-out", str(tmp_path / "cut")) == 0
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["key"] for r in records] == ["a/b"]
    listing = (tmp_path / "train.jsonl.rejected.tsv").read_text()
    assert "a__b" in listing and "also key 'a/b'" in listing
    assert sums(data) == before


def test_a_folders_keys_are_unique(tiny, tmp_path):
    clips = tmp_path / "clips"
    for rel in ("a/b", "a__b"):
        wav(clips / f"{rel}.wav", 0.5)
        (clips / f"{rel}.txt").write_text("ni hao")
    out = tmp_path / "train.jsonl"
    assert _prepare(tiny, out, "--audio-dir", str(clips)) == 0
    assert [json.loads(x)["key"] for x in out.read_text().splitlines()] == ["a__b"]
    assert "key repeated" in (tmp_path / "train.jsonl.rejected.tsv").read_text()


def test_a_key_with_whitespace_is_refused_not_written(tiny, tmp_path, capsys):
    """`call 1.wav` made the key `call 1`, which `ftenv eval score` read back as `call`."""
    clips = tmp_path / "clips"
    for name in ("call 1", "call2"):
        wav(clips / f"{name}.wav", 0.5)
        (clips / f"{name}.txt").write_text("ni hao")
    out = tmp_path / "train.jsonl"
    assert _prepare(tiny, out, "--audio-dir", str(clips)) == 0
    assert [json.loads(x)["key"] for x in out.read_text().splitlines()] == ["call2"]
    assert "the key 'call 1' holds whitespace" in capsys.readouterr().err


def test_a_multi_line_csv_cell_is_a_rejected_row(tiny, tmp_path, capsys):
    a, b, c, d = (wav(tmp_path / f"{n}.wav", 0.5) for n in "abcd")
    table = tmp_path / "list.csv"
    table.write_text(f'{a},"ni\nhao"\n{b},ok\n{c},"one, two"\n{d},one, two\n')
    out = tmp_path / "train.jsonl"
    assert _prepare(tiny, out, "--table", str(table)) == 0
    texts = [json.loads(x)["messages"][2]["content"] for x in out.read_text().splitlines()]
    assert texts == ["ok", "one, two"]
    listing = (tmp_path / "train.jsonl.rejected.tsv").read_text()
    assert "runs from line 1 to 2" in listing and "3 columns" in listing


BAD_LENGTHS = ["Infinity", "-Infinity", "1e999", "9" * 5000, "NaN", "[1e999]", '"' + "9" * 5000 + '"']


def _line(tmp_path: Path, speech_length: str) -> str:
    good = json.loads(line(wav(tmp_path / "a.wav", 1.0)))
    return json.dumps(good).replace('"speech_length": 100', f'"speech_length": {speech_length}')


@pytest.mark.parametrize("value", BAD_LENGTHS)
def test_a_length_of_any_size_is_a_named_line(tmp_path, capsys, value):
    """Infinity and 1e999 were OverflowErrors, 5,000 digits a ValueError of json, NaN one of split."""
    data = tmp_path / "in"
    data.mkdir()
    manifest = data / "train.jsonl"
    manifest.write_text(_line(data, "100") + "\n" + _line(data, value) + "\n")
    before = sums(data)
    argv = ["data", "check", "--output-dir", str(tmp_path / "o"), "--jobs", "1", str(manifest)]
    assert cli.main(argv) == UNUSABLE
    assert f"{manifest} line 2" in capsys.readouterr().err
    split = ["data", "split", str(manifest), "-o", str(tmp_path / "sets"), "--valid", "1"]
    assert cli.main(split) == UNUSABLE
    assert f"{manifest} line 2" in capsys.readouterr().err
    assert sums(data) == before


def test_json_nested_deeper_than_a_reader_follows_is_a_named_line(tmp_path, capsys):
    manifest = tmp_path / "train.jsonl"
    manifest.write_text(_line(tmp_path, "100") + "\n" + "[" * 200_000 + "]" * 200_000 + "\n")
    argv = ["data", "check", "--output-dir", str(tmp_path), "--jobs", "1", str(manifest)]
    assert cli.main(argv) == UNUSABLE
    assert "line 2: not usable JSON (nested deeper" in capsys.readouterr().err
    assert cli.main(["data", "split", str(manifest), "-o", str(tmp_path / "s"), "--valid", "1"]) == UNUSABLE


@pytest.mark.parametrize("valid", ["inf%", "1e999%", "1e999"])
def test_a_share_of_any_size_is_a_usage_error(tmp_path, capsys, valid):
    manifest = tmp_path / "all.jsonl"
    manifest.write_text("\n".join(_line(tmp_path, "100") for _ in range(3)) + "\n")
    assert (
        cli.main(["data", "split", str(manifest), "-o", str(tmp_path / "s"), f"--valid={valid}"]) == UNUSABLE
    )
    assert "neither a share" in capsys.readouterr().err


def test_split_never_writes_over_its_input(tmp_path, capsys):
    manifest = tmp_path / "train.jsonl"
    manifest.write_text("\n".join(_line(tmp_path, "100") for _ in range(3)) + "\n")
    before = sums(tmp_path)
    assert cli.main(["data", "split", str(manifest), "-o", str(tmp_path), "--valid", "1"]) == UNUSABLE
    assert f"the train set {manifest} is the JSONL {manifest}" in capsys.readouterr().err
    assert sums(tmp_path) == before


def test_a_set_with_nothing_to_train_on_is_not_ok(tmp_path, capsys):
    empty = tmp_path / "train.jsonl"
    empty.write_text("")
    valid = tmp_path / "valid.jsonl"
    valid.write_text(_line(tmp_path, "100") + "\n")
    argv = ["data", "check", "--output-dir", str(tmp_path), "--jobs", "1", "--valid", str(valid), str(empty)]
    assert cli.main(argv) == UNUSABLE
    assert "nothing to train on" in capsys.readouterr().err
    report = json.loads((tmp_path / check.REPORT_NAME).read_text())
    assert report["verdict"] == "errors" and report["counts"] == {check.EMPTIED: 1}


def test_text_length_is_compared_with_the_models_tokenizer(tiny, tmp_path, capsys):
    """`ni hao` is 5 tokens of the tiny model's tokenizer: a declared 5 passes, 40 is named."""
    audio = wav(tmp_path / "a.wav", 1.0)
    manifest = tmp_path / "train.jsonl"
    manifest.write_text(line(audio, text_length=5) + "\n" + line(audio, text_length=40) + "\n")
    argv = ["data", "check", "--model-dir", str(tiny), "--output-dir", str(tmp_path), "--jobs", "1"]
    assert cli.main([*argv, str(manifest)]) == 0  # a warning: the length rules count what it does
    report = json.loads((tmp_path / check.REPORT_NAME).read_text())
    found = [f for f in report["findings"] if f["code"] == "text_length_mismatch"]
    assert [f["line"] for f in found] == [2] and "5 tokens" in found[0]["message"]
