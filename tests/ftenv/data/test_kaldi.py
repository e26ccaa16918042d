"""`ftenv data prepare` on Kaldi folders as other tools write them: tabs or runs of spaces between
key and value, a byte-order mark, CRLF line ends, `segments` (each cut written as its own WAV),
wav.scp commands (run only when asked), utt2spk, the data folder itself, and relative paths read
from the folder a recipe runs in."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile

from ftenv import cli
from support.training_data import RATE, wav

TEXTS = {"utt1": "你好 世界", "utt2": "zai  jian ma", "utt3": "xie xie"}
SECONDS = {"utt1": 1.0, "utt2": 0.75, "utt3": 0.5}


def _prepare(tiny: Path, out: Path, *args: str, jobs: int = 1) -> int:
    argv = ["data", "prepare", *args, "--model-dir", str(tiny), "--output", str(out), "--jobs", str(jobs)]
    return cli.main(argv)


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _folder(root: Path, sep: str, bom: bool, end: str) -> Path:
    """A data folder written as another tool would: `sep` between key and value, `end` line ends."""
    data = root / "data"
    lead = "\ufeff" if bom else ""
    scp = [f"{k}{sep}{wav(root / 'wav' / f'{k}.wav', SECONDS[k])}" for k in TEXTS]
    (data / "x").mkdir(parents=True)
    (data / "wav.scp").write_bytes((lead + end.join(scp) + end).encode("utf-8"))
    text = [f"{k}{sep}{t}" for k, t in TEXTS.items()]
    (data / "text").write_bytes((lead + end.join(text) + end).encode("utf-8"))
    return data


def test_tabs_bom_and_crlf_as_other_tools_write_them(tiny, tmp_path, capsys):
    """Every row used and every transcript exact: today's reader split at the first space only."""
    for name, sep, bom, end in [
        ("tab", "\t", False, "\n"),
        ("tabs_and_spaces", " \t \t", False, "\n"),
        ("bom", " ", True, "\n"),
        ("crlf", " ", False, "\r\n"),
        ("all", "\t", True, "\r\n"),
    ]:
        data = _folder(tmp_path / name, sep, bom, end)
        out = tmp_path / name / "train.jsonl"
        assert _prepare(tiny, out, "--wav-scp", str(data)) == 0, capsys.readouterr().err
        records = _records(out)
        assert [r["key"] for r in records] == list(TEXTS), name
        assert [r["messages"][2]["content"] for r in records] == list(TEXTS.values()), name
        assert [r["speech_length"] for r in records] == [int(SECONDS[k] * 100) for k in TEXTS]
        assert not (tmp_path / name / "train.jsonl.rejected.tsv").exists()


def test_a_table_with_a_bom_before_its_header(tiny, tmp_path):
    table = tmp_path / "list.tsv"
    body = "path\ttext\r\n" + "".join(
        f"{wav(tmp_path / f'{k}.wav', SECONDS[k])}\t{t}\r\n" for k, t in TEXTS.items()
    )
    table.write_bytes(("\ufeff" + body).encode("utf-8"))
    out = tmp_path / "train.jsonl"
    assert _prepare(tiny, out, "--table", str(table)) == 0
    assert [r["messages"][2]["content"] for r in _records(out)] == list(TEXTS.values())
    assert not (tmp_path / "train.jsonl.rejected.tsv").exists()  # the header was not read as a row


def _recording(path: Path, seconds: float, channels: int = 1) -> np.ndarray:
    """A 16-bit recording whose every sample is different (a ramp), so a cut is checked by value."""
    n = int(seconds * RATE)
    ramp = (np.arange(n * channels) % 60000 - 30000).astype("int16").reshape(n, channels)
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), ramp, RATE, subtype="PCM_16")
    return ramp


def test_segments_are_cut_from_their_recordings(tiny, tmp_path, capsys):
    data = tmp_path / "data"
    rec_a = _recording(tmp_path / "rec" / "a.wav", 3.0)
    rec_b = _recording(tmp_path / "rec" / "b.wav", 2.0, channels=2)
    data.mkdir()
    (data / "wav.scp").write_text(f"A\t{tmp_path / 'rec/a.wav'}\nB {tmp_path / 'rec/b.wav'}\n")
    segments = {"s1": ("A", 0.5, 1.25, None), "s2": ("A", 2.1, -1, None), "s3": ("B", 0.2, 1.0, 1)}
    (data / "segments").write_text(
        "".join(f"{k} {r} {s} {e}{'' if c is None else f' {c}'}\n" for k, (r, s, e, c) in segments.items())
        + "s4 A 2.5 9.0\n"  # ends 6 s after its recording: refused, not cut short silently
    )
    (data / "text").write_text("s1 yi\ns2 er\ns3 san\ns4 si\n")
    (data / "utt2spk").write_text("s1 spk1\ns2 spk1\ns3 spk2\ns4 spk2\n")
    out, audio_out = tmp_path / "train.jsonl", tmp_path / "cut"
    assert _prepare(tiny, out, "--wav-scp", str(data / "wav.scp")) == 2
    assert "--audio-out DIR" in capsys.readouterr().err and not out.exists()
    assert _prepare(tiny, out, "--wav-scp", str(data), "--audio-out", str(audio_out), jobs=2) == 0
    err = capsys.readouterr().err
    records = _records(out)
    assert [r["key"] for r in records] == ["s1", "s2", "s3"]
    assert [r.get("speaker") for r in records] == ["spk1", "spk1", "spk2"]
    assert [r["speech_length"] for r in records] == [75, 90, 80]
    for r, (_key, (rec, start, end, channel)) in zip(records, segments.items(), strict=True):
        audio = r["messages"][1]["content"].split("!", 1)[1].split("<|", 1)[0]
        assert Path(audio).parent == audio_out
        got, rate = soundfile.read(audio, dtype="int16")
        assert rate == RATE and soundfile.info(audio).subtype == "PCM_16"
        source = rec_a if rec == "A" else rec_b[:, channel]
        last = len(source) if end == -1 else round(end * RATE)
        assert np.array_equal(got, source[round(start * RATE) : last].reshape(got.shape))
    assert "s4" in err and "after the recording's end" in err
    first = {p.name: p.read_bytes() for p in audio_out.iterdir()}
    assert _prepare(tiny, out, "--wav-scp", str(data), "--audio-out", str(audio_out)) == 0
    assert {p.name: p.read_bytes() for p in audio_out.iterdir()} == first  # the same bytes


def test_a_command_entry_runs_only_when_asked(tiny, tmp_path, capsys):
    ramp = _recording(tmp_path / "rec" / "a.wav", 1.5)
    wav(tmp_path / "b.wav", 1.0)
    data = tmp_path / "data"
    data.mkdir()
    (data / "wav.scp").write_text(f"c1 cat {tmp_path / 'rec/a.wav'} |\nb1 {tmp_path / 'b.wav'}\nc2 false |\n")
    (data / "text").write_text("c1 yi\nb1 er\nc2 san\n")
    out, audio_out = tmp_path / "train.jsonl", tmp_path / "cmd"
    assert _prepare(tiny, out, "--wav-scp", str(data), "--audio-out", str(audio_out)) == 2
    err = capsys.readouterr().err
    assert "--run-commands" in err and "2 command entries" in err and "cat " in err
    assert not out.exists() and not audio_out.exists()  # nothing written, nothing run
    argv = ["--wav-scp", str(data), "--audio-out", str(audio_out), "--run-commands"]
    assert _prepare(tiny, out, *argv) == 0
    err = capsys.readouterr().err
    records = _records(out)
    assert [r["key"] for r in records] == ["c1", "b1"]
    assert records[0]["speech_length"] == 150
    written, _ = soundfile.read(str(audio_out / "c1.wav"), dtype="int16")
    assert np.array_equal(written, ramp[:, 0])
    assert "c2" in err and "exited 1" in err  # a failing command is named with its exit code


def test_relative_paths_from_the_folder_a_recipe_runs_in(tiny, tmp_path, monkeypatch, capsys):
    """Kaldi recipes write wav.scp paths relative to the recipe's folder (where run.sh runs), not to
    data/train/: read from the working directory, as Kaldi and FunASR's scp2jsonl read them."""
    run = tmp_path / "recipe"
    wav(run / "wav" / "utt1.wav", 1.0)
    wav(run / "wav" / "utt2.wav", 0.5)
    data = run / "data" / "train"
    data.mkdir(parents=True)
    (data / "wav.scp").write_text("utt1 wav/utt1.wav\nutt2 local.wav\n")
    wav(data / "local.wav", 0.7)  # written for the list's folder: taken from there, and said
    (data / "text").write_text("utt1 yi\nutt2 er\n")
    monkeypatch.chdir(run)
    out = run / "train.jsonl"
    assert _prepare(tiny, out, "--wav-scp", "data/train") == 0
    err = capsys.readouterr().err
    records = _records(out)
    audio = [r["messages"][1]["content"].split("!", 1)[1].split("<|", 1)[0] for r in records]
    assert audio == [str(run / "wav/utt1.wav"), str(data / "local.wav")]
    assert "relative path: local.wav: not in the working directory" in err
    # Both readings exist: the working directory's is taken, and that is said.
    wav(data / "wav" / "utt1.wav", 3.0)
    assert _prepare(tiny, out, "--wav-scp", "data/train") == 0
    assert _records(out)[0]["speech_length"] == 100
    assert f"took {run / 'wav/utt1.wav'}, as Kaldi and FunASR read relative paths" in capsys.readouterr().err


def test_transcript_normalization_is_explicit_and_recorded(tiny, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "wav.scp").write_text(f"u1 {wav(tmp_path / 'u1.wav', 1.0)}\n")
    (data / "text").write_text("u1 你 好 世 界 ＡＢＣ，Ok\n", encoding="utf-8")
    out = tmp_path / "train.jsonl"
    assert _prepare(tiny, out, "--wav-scp", str(data)) == 0  # off by default: as written
    assert _records(out)[0]["messages"][2]["content"] == "你 好 世 界 ＡＢＣ，Ok"
    assert json.loads((tmp_path / "train.jsonl.prepare.json").read_text())["normalization"] == "none"
    assert _prepare(tiny, out, "--wav-scp", str(data), "--normalize", "prepare") == 0
    assert _records(out)[0]["messages"][2]["content"] == "你好世界 ABC,Ok"  # case and punctuation kept
    recorded = json.loads((tmp_path / "train.jsonl.prepare.json").read_text())
    assert (
        recorded["normalization"] == "prepare"
        and "spaces between CJK characters removed" in recorded["normalization_rules"]
    )
    assert _prepare(tiny, out, "--wav-scp", str(data), "--normalize", "loud") == 2
    assert "unknown normalization 'loud'" in capsys.readouterr().err
