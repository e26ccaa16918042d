"""The data check before torchrun once per data: a rerun (or a requeue) with the same files and
settings skips it and says since when; a touched file or another setting checks again."""

from __future__ import annotations

import json
import os

from ftenv.data import check
from support.finetune_launch import check_data, plan
from support.training_data import line, wav


def test_the_check_is_skipped_until_a_file_or_a_setting_changes(tmp_path, capsys):
    audio = [wav(tmp_path / "wav" / f"u{i}.wav", 1.0 + i / 10) for i in range(3)]
    train, valid = tmp_path / "train.jsonl", tmp_path / "val.jsonl"
    train.write_text("".join(line(a, speech_length=100 + 10 * i) + "\n" for i, a in enumerate(audio[:2])))
    valid.write_text(line(audio[2], speech_length=120) + "\n")
    out = tmp_path / "out"
    settings = {"train_data_set_list": train, "valid_data_set_list": valid, "output_dir": out}

    def gate(**extra) -> str:
        assert check_data(plan({**settings, **extra}), tmp_path, False) is None
        return capsys.readouterr().err

    first = gate()
    assert "checking every line" in first
    report = json.loads((out / check.REPORT_NAME).read_text())
    assert report["verdict"] == "ok" and report["checked_at"]
    second = gate()
    assert f"data check: unchanged since {report['checked_at']}, skipped" in second
    assert "checking every line" not in second
    info = os.stat(audio[1])
    os.utime(audio[1], ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))  # one audio file touched
    assert "checking every line" in gate()
    assert "unchanged since" in gate()
    assert "checking every line" in gate(**{"dataset_conf.max_token_length": 3000})  # another setting
    with valid.open("a") as fh:  # the manifest itself grows
        fh.write(line(audio[0], speech_length=100) + "\n")
    assert "checking every line" in gate(**{"dataset_conf.max_token_length": 3000})


def test_a_failed_check_is_never_skipped(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    train.write_text(line(tmp_path / "missing.wav") + "\n")
    launch = plan({"train_data_set_list": train, "output_dir": tmp_path / "out"})
    for _ in range(2):
        assert check_data(launch, tmp_path, False) == 2
        assert "checking every line" in capsys.readouterr().err
