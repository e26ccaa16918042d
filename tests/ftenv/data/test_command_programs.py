"""wav.scp commands whose program is missing (sph2pipe, which Debian and Ubuntu do not package, so
the image has none): `ftenv data prepare --run-commands` refuses once per missing program, with its
fix, before running anything, instead of the shell's exit 127 once per segment."""

from __future__ import annotations

import os
from pathlib import Path

from ftenv import cli
from ftenv.data import programs
from support.training_data import wav


def _prepare(tiny: Path, data: Path, out: Path, audio_out: Path) -> int:
    argv = ["data", "prepare", "--wav-scp", str(data), "--audio-out", str(audio_out), "--run-commands"]
    return cli.main([*argv, "--model-dir", str(tiny), "--output", str(out), "--jobs", "1"])


def test_the_programs_of_a_command_line_are_its_stages_first_words():
    assert programs.programs("sox -t flac a.flac -t wav - remix 1") == ["sox"]
    assert programs.programs("FOO=1 /opt/sph2pipe -f wav x.sph | sox -t wav - -t wav - 2>/dev/null") == [
        "/opt/sph2pipe",
        "sox",
    ]
    assert programs.programs("<in.wav flac -c -d -s - && exec cat x") == ["flac", "cat"]
    assert programs.programs("$KALDI_ROOT/tools/sph2pipe -f wav x.sph") == []  # the shell expands it
    assert programs.programs("echo 'unclosed") == []


def test_a_missing_program_is_named_once_with_its_fix(tiny, tmp_path, monkeypatch, capsys):
    # A PATH with `cat` only: sph2pipe and the made-up tool are missing whatever the machine has.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cat = next(Path(d) / "cat" for d in os.get_exec_path() if (Path(d) / "cat").is_file())
    (bin_dir / "cat").symlink_to(cat)
    monkeypatch.setenv("PATH", str(bin_dir))
    rec = wav(tmp_path / "rec.wav", 1.0)
    data = tmp_path / "data"
    data.mkdir()
    (data / "wav.scp").write_text(
        f"A sph2pipe -f wav {tmp_path}/a.sph |\nB sph2pipe -f wav {tmp_path}/b.sph |\n"
        f"C cat {rec} |\nD ftenv-no-such-tool {rec} |\nE {tmp_path}/nowhere/sph2pipe -f wav c.sph |\n"
    )
    keys = [f"{r}{i}" for r in "ABCDE" for i in range(3)]  # three segments of each recording
    (data / "segments").write_text(
        "".join(f"{k} {k[0]} {0.3 * int(k[1])} {0.3 * int(k[1]) + 0.2}\n" for k in keys)
    )
    (data / "text").write_text("".join(f"{k} yi\n" for k in keys))
    out, audio_out = tmp_path / "train.jsonl", tmp_path / "cut"
    assert _prepare(tiny, data, out, audio_out) == 2
    err = capsys.readouterr().err
    assert "3 programs that cannot run here" in err
    lines = [line.strip() for line in err.splitlines() if "recording" in line and ", the first for " in line]
    assert [line.split(" ", 1)[0] for line in lines] == [
        "sph2pipe",
        "ftenv-no-such-tool",
        f"{tmp_path}/nowhere/sph2pipe",
    ]
    assert (
        "not found on PATH; in the commands of 2 recordings, the first for A0: `sph2pipe -f wav" in lines[0]
    )
    assert "sph2pipe -f wav IN.sph OUT.wav" in lines[0] and "sox -t sph IN.sph -t wav - |" in lines[0]
    assert "in the command of 1 recording, the first for D0:" in lines[1] and programs.GENERIC in lines[1]
    assert "not an executable file" in lines[2] and "Debian and Ubuntu package no sph2pipe" in lines[2]
    assert "exited 127" not in err and "not found" not in err.replace("not found on PATH", "")
    assert not out.exists() and not audio_out.exists()  # nothing run, nothing written
