"""`ftenv data split`: every line in exactly one set, no speaker in two sets when splitting by
speaker (from the lines' speaker field or utt2spk), the same bytes for the same input and seed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ftenv import cli
from support.training_data import line


def _jsonl(path: Path, with_speaker: bool = True) -> list[str]:
    """60 lines of 12 speakers with uneven numbers of lines."""
    rows = []
    for i in range(60):
        item = json.loads(line(f"/data/u{i}.wav", text=f"ju zi {i}", speech_length=100 + i))
        item = {"key": f"u{i:02d}", **item}
        if with_speaker:
            item["speaker"] = f"spk{(i * i) % 12}"
        rows.append(json.dumps(item, ensure_ascii=False))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return rows


def _sets(out: Path) -> dict[str, list[dict]]:
    return {
        p.stem: [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines()]
        for p in out.glob("*.jsonl")
    }


def _speaker(item: dict) -> str:
    return f"spk{(int(item['key'][1:]) ** 2) % 12}"


def test_split_by_speaker_never_shares_a_speaker(tmp_path, capsys):
    rows = _jsonl(tmp_path / "all.jsonl")
    argv = ["data", "split", str(tmp_path / "all.jsonl"), "--valid", "10%", "--test", "0.1", "--by-speaker"]
    assert cli.main([*argv, "-o", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    sets = _sets(tmp_path / "a")
    assert sorted(sets) == ["test", "train", "valid"]
    speakers = {name: {_speaker(x) for x in items} for name, items in sets.items()}
    assert not speakers["train"] & speakers["valid"] and not speakers["train"] & speakers["test"]
    assert not speakers["valid"] & speakers["test"]
    assert Counter(json.dumps(x, ensure_ascii=False) for s in sets.values() for x in s) == Counter(rows)
    assert all(len(sets[name]) >= 6 for name in ("valid", "test"))
    hours = sum(100 + i for i in range(60)) / 100 / 3600
    shown = sum(float(x.split(" lines, ")[1].split(" h")[0]) for x in err.splitlines() if " lines, " in x)
    assert abs(shown - hours) < 0.015 and "speakers ->" in err
    assert cli.main([*argv, "-o", str(tmp_path / "b")]) == 0  # the same input: the same bytes
    for name in ("train", "valid", "test"):
        assert (tmp_path / "a" / f"{name}.jsonl").read_bytes() == (
            tmp_path / "b" / f"{name}.jsonl"
        ).read_bytes()


def test_speakers_from_utt2spk_and_a_split_by_count(tmp_path, capsys):
    _jsonl(tmp_path / "all.jsonl", with_speaker=False)
    base = ["data", "split", str(tmp_path / "all.jsonl"), "-o", str(tmp_path / "o"), "--valid", "7"]
    assert cli.main([*base, "--by-speaker"]) == 2
    assert "have no speaker" in capsys.readouterr().err and not (tmp_path / "o").exists()
    (tmp_path / "utt2spk").write_text("".join(f"u{i:02d}\tspk{(i * i) % 12}\n" for i in range(60)))
    assert cli.main([*base, "--by-speaker", "--utt2spk", str(tmp_path / "utt2spk")]) == 0
    sets = _sets(tmp_path / "o")
    assert not {_speaker(x) for x in sets["train"]} & {_speaker(x) for x in sets["valid"]}
    assert cli.main([*base, "--seed", "3"]) == 0  # at random, by count
    sets = _sets(tmp_path / "o")
    assert len(sets["valid"]) == 7 and len(sets["train"]) == 53
