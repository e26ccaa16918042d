"""`ftenv data prepare` and `ftenv data check`, checked against the pinned FunASR itself: what prepare
writes, FunASR's own dataset class loads (built as the trainer builds it, on the tiny model); each
fault planted in a manifest is found with its line number; the batch-budget prediction agrees with
FunASR's own sampler; `ftenv finetune` refuses bad data before torchrun. Audio is generated here
(tiny WAVs with numpy + soundfile, an MP3 through libsndfile's encoder)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import soundfile

from ftenv import cli, variables
from ftenv.data import check, rules
from ftenv.launch import recipe
from ftenv.selfcheck import tinymodel
from support import GOOD_RECORD
from support.finetune_launch import check_data, plan
from support.training_data import funasr_dataset, line, wav

# --- prepare ----------------------------------------------------------------------------------


def _inputs(form: str, root: Path) -> tuple[list[str], list[tuple[str, float, str]]]:
    """Input files of one form with 3 good utterances, a missing audio and an empty transcript;
    returns the prepare arguments and the good (key, seconds, text)."""
    good = [("utt1", 1.0, "ni hao"), ("utt2", 1.37, "zai jian"), ("utt3", 0.55, "xie xie ni")]
    audio = root / "audio"
    for key, seconds, _ in good:
        wav(audio / f"{key}.wav", seconds)
    wav(audio / "blank.wav", 0.8)
    rows = [
        *[(k, audio / f"{k}.wav", t) for k, _, t in good],
        ("gone", audio / "gone.wav", "lost"),
        ("blank", audio / "blank.wav", ""),
    ]
    if form == "kaldi":
        (root / "wav.scp").write_text("".join(f"{k} {p}\n" for k, p, _ in rows), encoding="utf-8")
        (root / "text").write_text("".join(f"{k} {t}\n" for k, _, t in rows), encoding="utf-8")
        return ["--wav-scp", str(root / "wav.scp"), "--text", str(root / "text")], good
    if form == "table":
        body = "path\ttext\n" + "".join(f"{p}\t{t}\n" for _, p, t in rows)
        (root / "list.tsv").write_text(body, encoding="utf-8")
        return ["--table", str(root / "list.tsv")], good
    for _key, p, text in rows:
        if p.exists():
            p.with_suffix(".txt").write_text(text, encoding="utf-8")
    wav(audio / "notext.wav", 0.5)  # no transcript beside it
    (audio / "broken.wav").write_bytes(b"RIFF" + bytes(range(256)) * 8)  # not audio
    (audio / "broken.txt").write_text("po le", encoding="utf-8")
    return ["--audio-dir", str(audio)], good


@pytest.mark.parametrize("form", ["kaldi", "table", "folder"])
def test_prepare_writes_jsonl_that_funasrs_dataset_loads(tiny, tmp_path, form, capsys):
    args, good = _inputs(form, tmp_path)
    out = tmp_path / "train.jsonl"
    argv = ["data", "prepare", *args, "--model-dir", str(tiny), "--output", str(out), "--jobs", "2"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    first = out.read_bytes()
    records = [json.loads(x) for x in first.decode().splitlines()]
    assert [r["key"] for r in records] == [k for k, _, _ in good]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tinymodel.paths(tiny).llm_dir))
    for r, (_, seconds, text) in zip(records, good, strict=True):
        assert r["speech_length"] == int(seconds * 100)
        assert r["text_length"] == len(tok.encode(text))
        assert r["messages"][2]["content"] == text
        assert set(r) == set(GOOD_RECORD) | {"key"}
    # Every row not used is named with its reason, on the terminal and in the listing.
    listing = (tmp_path / "train.jsonl.rejected.tsv").read_text()
    assert "empty transcript" in listing and "not used:" in err and "empty transcript" in err
    if form == "folder":
        assert "no transcript beside it" in listing and "broken.wav: " in listing and "libsndfile" in listing
    else:
        assert "audio file not found" in listing
        first_bad = 4 if form == "kaldi" else 5  # the table has a header row
        assert f"line {first_bad} (gone)" in err and f"line {first_bad + 1} (blank)" in err
    # The same input gives the same bytes.
    assert cli.main(argv) == 0
    assert out.read_bytes() == first
    # FunASR's own dataset class reads every line and loads each sample itself (no substitute).
    ds = funasr_dataset(tiny, out)
    assert len(ds) == len(good)
    for i in range(len(ds)):
        sample = ds[i]
        assert sample is not None and sample["item"] is ds.index_ds[i]
        assert sample["input_ids"].shape[0] > 0


def test_prepare_without_a_tokenizer_or_input_says_what_to_give(tmp_path, capsys):
    assert cli.main(["data", "prepare", "--output", str(tmp_path / "x.jsonl")]) == 2
    assert "give one input" in capsys.readouterr().err


# --- check ------------------------------------------------------------------------------------


@pytest.fixture
def planted(tmp_path) -> tuple[Path, dict[str, int]]:
    """A 40-line manifest with one fault each on known lines (the bad byte far past line 5)."""
    audio = tmp_path / "audio"
    lines, where = [], {}
    for i in range(40):
        lines.append(line(wav(audio / f"u{i}.wav", 1.0 + i / 100), speech_length=100 + i))
    lines[9] = line(audio / "missing.wav")
    where["audio_unusable:missing"] = 10
    cut = wav(audio / "cut.wav", 2.0)
    cut.write_bytes(cut.read_bytes()[: 44 + 16000])  # half a second of a two-second file
    lines[11] = line(cut, speech_length=200)
    where["audio_unusable:truncated"] = 12
    if "MP3" in soundfile.available_formats():
        lines[13] = line(wav(audio / "ok.mp3", 1.5, fmt="MP3"), speech_length=150)
        where["mp3_ok"] = 14
    (audio / "bad.mp3").write_bytes(b"ID3" + os.urandom(2000))
    lines[14] = line(audio / "bad.mp3")
    where["audio_unusable:undecodable"] = 15
    lines[15] = line(audio / "u15.wav", text="  ", speech_length=115)
    where["empty_transcript"] = 16
    lines[17] = line(wav(audio / "long.wav", 60.0, rate=8000), speech_length=6000, text_length=40)
    where["dropped_by_length_rules"] = 18
    lines[19] = lines[2]
    where["duplicate_audio"] = 20
    lines[21] = line(audio / "u21.wav", speech_length=21)  # a 1.21 s file declared as 0.21 s
    where["speech_length_mismatch"] = 22
    raw = [x.encode() for x in lines]
    raw[36] = raw[36].replace(b"ni hao", b"ni \xff\xfe hao")
    where["not_utf8"] = 37
    path = tmp_path / "train.jsonl"
    path.write_bytes(b"\n".join(raw) + b"\n")
    return path, where


def test_check_finds_each_planted_fault_with_its_line(planted, tmp_path, capsys):
    path, where = planted
    rc = cli.main(["data", "check", "--output-dir", str(tmp_path / "out"), "--jobs", "2", str(path)])
    assert rc == 2  # unusable input, never 4
    report = json.loads((tmp_path / "out" / check.REPORT_NAME).read_text())
    found = {(f["code"], f["line"]) for f in report["findings"]}
    messages = {f["line"]: f["message"] for f in report["findings"]}
    for what, number in where.items():
        if what == "mp3_ok":
            assert number not in messages, messages.get(number)  # a good MP3 decodes: no finding
            continue
        code = what.split(":")[0]
        assert (code, number) in found, (what, sorted(found))
    assert "not found" in messages[where["audio_unusable:missing"]]
    assert "truncated" in messages[where["audio_unusable:truncated"]]
    assert "cannot decode" in messages[where["audio_unusable:undecodable"]] or "libsndfile" in messages[15]
    assert "max_token_length 2048" in messages[where["dropped_by_length_rules"]]
    assert "line 3" in messages[where["duplicate_audio"]]
    assert "line 37" in capsys.readouterr().err
    assert report["files"][0]["dropped"] == {rules.OVER_TOKEN_LIMIT: 1}
    # The one line over max_token_length is 2.5% of the set: above the watchdog's limit (1%).
    assert report["counts"][check.NEVER_TRAINED] == 1 and "1 of 40 training lines" in messages[None]
    assert report["verdict"] == "errors" and report["errors"] == 7


def test_check_of_good_data_passes_and_names_its_settings(tiny, tmp_path, capsys):
    p = tinymodel.paths(tiny)
    argv = ["data", "check", "--model-dir", str(tiny), "--valid", str(p.val_jsonl)]
    assert cli.main([*argv, "--output-dir", str(tmp_path), str(p.train_jsonl)]) == 0
    report = json.loads((tmp_path / check.REPORT_NAME).read_text())
    assert report["verdict"] == "ok" and report["errors"] == 0
    # The recipe's batch settings win over config.yaml's (400), as in `ftenv finetune`.
    assert report["settings"]["batch_size"] == 6000 and report["settings"]["max_token_length"] == 3500
    assert "OK: 0 error(s)" in capsys.readouterr().err


def test_recipe_defaults_are_the_recipes():
    """The rules of a run that sets nothing are the recipe's (LengthRules() where no setting came)."""
    recipe_conf = {k.split(".", 1)[1]: v for k, v in recipe.RECIPE_DEFAULTS if k.startswith("dataset_conf.")}
    for key in ("batch_size", "batch_type", "sort_size"):
        assert str(rules.DEFAULTS[key]) == recipe_conf[key]


@pytest.fixture
def long_valid(tmp_path) -> Path:
    """The issue's hand-tried validation set: 4 utterances of about 850 frames."""
    val = tmp_path / "val.jsonl"
    rows = [
        line(wav(tmp_path / f"v{i}.wav", 8.5 + i / 100), speech_length=850 + i, text_length=5)
        for i in range(4)
    ]
    val.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return val


def test_a_validation_set_funasr_would_empty_is_an_error(tiny, long_valid, tmp_path, capsys):
    train = tinymodel.paths(tiny).train_jsonl
    base = ["data", "check", "--valid", str(long_valid), "--output-dir", str(tmp_path), str(train)]
    assert cli.main(base) == 0  # the recipe's budget of 6000 holds them
    assert cli.main([*base, "++dataset_conf.batch_size=300"]) == 2
    err = capsys.readouterr().err
    assert "KeyError: 'input_ids'" in err and "raise ++dataset_conf.batch_size" in err
    # FunASR's own sampler agrees: its first validation batch is empty.
    from funasr.datasets.audio_datasets.samplers import CustomDistributedBufferDynamicBatchSampler

    ds = funasr_dataset(tiny, long_valid, is_training=False)
    sampler = CustomDistributedBufferDynamicBatchSampler(
        ds, batch_size=300, is_training=False, sort_size=1024
    )
    assert next(iter(sampler)) == []
    lens = [ds.get_source_len(i) for i in range(len(ds))]
    assert rules.LengthRules(batch_size=300).empty_batches(lens) == 1
    assert rules.LengthRules(batch_size=6000).empty_batches(lens) == 0
    ok = list(
        CustomDistributedBufferDynamicBatchSampler(ds, batch_size=6000, is_training=False, sort_size=1024)
    )
    assert all(ok)


def test_overrides_and_the_models_config_make_the_rules(tmp_path):
    (tmp_path / "config.yaml").write_text("dataset_conf:\n  max_token_length: 3500\n  batch_size: 400\n")
    r = rules.rules_for(tmp_path, {"dataset_conf.batch_size": 300, "train_conf.max_epoch": 2}, 8)
    assert (r.batch_size, r.max_token_length, r.world_size) == (300, 3500, 8)
    with pytest.raises(ValueError, match="batch_size"):
        rules.rules_for(None, {"dataset_conf.batch_size": "lots"})


# --- finetune ---------------------------------------------------------------------------------


def _finetune(tmp_path: Path, train: Path, valid: Path, *extra: str) -> list[str]:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.yaml").write_text("model: FunASRNano\n")
    (model / "model.pt").write_bytes(b"")
    return [
        "finetune", "--model-dir", str(model), "--train", str(train), "--valid", str(valid),
        "--output-dir", str(tmp_path / "out"), "--gpus-per-node", "1", *extra,
    ]  # fmt: skip


def test_finetune_refuses_bad_data_before_torchrun(planted, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FTENV_REPORT", "0")
    path, _ = planted
    good = tmp_path / "val.jsonl"
    good.write_text(line(tmp_path / "audio/u0.wav") + "\n", encoding="utf-8")
    assert cli.main(_finetune(tmp_path, path, good)) == 2
    err = capsys.readouterr().err
    assert "refusing to start" in err and str(tmp_path / "out" / check.REPORT_NAME) in err
    assert "line 37" in err and "running " not in err  # the torchrun line is never reached
    assert json.loads((tmp_path / "out" / check.REPORT_NAME).read_text())["verdict"] == "errors"


def test_finetune_refuses_the_issues_validation_set(tiny, long_valid, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FTENV_REPORT", "0")
    argv = _finetune(tmp_path, tinymodel.paths(tiny).train_jsonl, long_valid, "++dataset_conf.batch_size=300")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "KeyError: 'input_ids'" in err and "refusing to start" in err


def test_the_data_check_can_be_skipped(planted, tmp_path, monkeypatch, capsys):

    path, _ = planted
    launch = plan({"train_data_set_list": path, "output_dir": tmp_path})
    assert check_data(launch, tmp_path, True) is None
    monkeypatch.setenv(variables.DATA_CHECK, "0")
    assert check_data(launch, tmp_path, False) is None
    assert "data check skipped (FTENV_DATA_CHECK=0)" in capsys.readouterr().err
    monkeypatch.delenv(variables.DATA_CHECK)
    assert check_data(launch, tmp_path, False) == 2
    assert plan({}, nnodes="1:4", nproc=8).world_size == 32


def test_a_bad_byte_in_the_first_lines_is_an_input_error_not_an_internal_one(tmp_path, capsys):
    """The quick check of the first lines (even in a dry run) read the file as text: exit 4."""
    audio = wav(tmp_path / "a.wav", 1.0)
    bad = tmp_path / "train.jsonl"
    bad.write_bytes(line(audio).encode() + b"\n" + line(audio).encode().replace(b"ni", b"\xc3(", 1) + b"\n")
    good = tmp_path / "val.jsonl"
    good.write_text(line(audio) + "\n", encoding="utf-8")
    assert cli.main([*_finetune(tmp_path, bad, good), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "line 2: not UTF-8 (byte 0xc3" in err and "internal error" not in err


def test_a_list_of_manifests_is_followed_as_funasr_does(planted, tmp_path):
    path, where = planted
    listing = tmp_path / "train.list"  # FunASR reads a data file not named *.jsonl as a list of them
    listing.write_text(f"{path}\n", encoding="utf-8")
    assert cli.main(["data", "check", "--output-dir", str(tmp_path / "o"), "--jobs", "1", str(listing)]) == 2
    report = json.loads((tmp_path / "o" / check.REPORT_NAME).read_text())
    assert [f["path"] for f in report["files"]] == [str(path)]
    assert ("not_utf8", where["not_utf8"]) in {(f["code"], f["line"]) for f in report["findings"]}
