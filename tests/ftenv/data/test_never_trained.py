"""The lines FunASR's length rules never train, refused before the run by the watchdog's own rule:
`ftenv data check` counts what FunASR's dataset and sampler, with the trainer entry's counter, then
report to the watchdog, and refuses above the same limit; and relative paths as the trainer reads
them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftenv import cli
from ftenv.data import check
from ftenv.watchdog import data_loss
from support.training_data import funasr_dataset, line, wav


def _train(tmp_path: Path, lines: int, too_long: int) -> Path:
    """`lines` lines, the first `too_long` of them over the tiny model's max_token_length (3500)."""
    short, long = wav(tmp_path / "short.wav", 1.0), wav(tmp_path / "long.wav", 36.5, rate=8000)
    rows = [line(long, speech_length=3650) for _ in range(too_long)]
    rows += [line(short, speech_length=100) for _ in range(lines - too_long)]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _watchdog_tally(tiny: Path, train: Path, capfd) -> data_loss.DataLossTally:
    """What the watchdog adds up from FunASR's own dataset and the recipe's sampler on this file."""
    from funasr.datasets.audio_datasets.samplers import CustomDistributedBufferDynamicBatchSampler

    from ftenv.data import runtime

    runtime.install()
    capfd.readouterr()
    ds = funasr_dataset(tiny, train)
    list(
        CustomDistributedBufferDynamicBatchSampler(ds, batch_size=6000, max_token_length=3500, sort_size=1024)
    )
    tally = data_loss.DataLossTally()
    for text in capfd.readouterr().err.splitlines():
        tally.observe(text.encode())
    return tally


@pytest.mark.parametrize(("too_long", "refused"), [(3, True), (1, False)])
def test_the_check_refuses_what_the_watchdog_would_fail(tiny, tmp_path, capfd, too_long, refused):
    train = _train(tmp_path, 100, too_long)
    argv = [
        "data",
        "check",
        "--model-dir",
        str(tiny),
        "--output-dir",
        str(tmp_path),
        "--jobs",
        "1",
        str(train),
    ]
    assert cli.main(argv) == (2 if refused else 0)
    err = capfd.readouterr().err
    report = json.loads((tmp_path / check.REPORT_NAME).read_text())
    assert report["counts"].get(check.NEVER_TRAINED, 0) == int(refused)
    if refused:
        assert f"{too_long} of 100 training lines ({too_long}.0%) never train" in err
        assert "over_max_token_length 3" in err and "raise ++dataset_conf.max_token_length (now 3500" in err
        assert "the longest line needs 3652" in err and "split the long utterances" in err
    tally = _watchdog_tally(tiny, train, capfd)
    assert tally.set_share() == too_long / 100  # the same count, of the same lines
    assert tally.failed() is refused


def test_a_relative_path_the_trainer_would_not_find(tmp_path, monkeypatch):
    """A JSONL's relative path is opened by the trainer from its working directory: a file that is
    only beside the manifest is an error that says so (both readings named)."""
    data = tmp_path / "data"
    wav(data / "wav" / "a.wav", 1.0)
    manifest = data / "train.jsonl"
    manifest.write_text(line("wav/a.wav") + "\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(run)
    assert cli.main(["data", "check", "--output-dir", str(run), "--jobs", "1", str(manifest)]) == 2
    message = json.loads((run / check.REPORT_NAME).read_text())["findings"][0]["message"]
    assert f"not in the trainer's working directory {run}" in message
    assert str(data / "wav" / "a.wav") in message
    monkeypatch.chdir(data)  # from the manifest's folder both readings are the same file
    assert cli.main(["data", "check", "--output-dir", str(run), "--jobs", "1", str(manifest)]) == 0


def test_finetune_names_a_relative_path_only_beside_the_manifest(tiny, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    wav(data / "wav" / "a.wav", 1.0)
    (data / "train.jsonl").write_text(line("wav/a.wav") + "\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(run)
    monkeypatch.setenv("FTENV_REPORT", "0")
    argv = ["finetune", "--model-dir", str(tiny), "--train", str(data / "train.jsonl"), "--valid"]
    argv += [str(data / "train.jsonl"), "--output-dir", str(run / "out"), "--gpus-per-node", "1", "--dry-run"]
    assert cli.main(argv) == 2
    assert f"wav/a.wav is not in the trainer's working directory {run}" in capsys.readouterr().err
