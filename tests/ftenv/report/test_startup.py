"""The start-up report from `ftenv finetune` and `ftenv selfcheck` themselves: once per node, not
again after the image's entrypoint showed it, never blocking the command."""

from __future__ import annotations

import os
import subprocess
import sys
import wave
from pathlib import Path

import pytest

from ftenv import cli, variables
from ftenv.commands import finetune as finetune_command
from ftenv.report import startup
from ftenv.report.startup import show_once, wanted
from ftenv.trainer import compile_setting


@pytest.mark.parametrize(
    ("env", "shown"),
    [
        ({}, True),
        ({"LOCAL_RANK": "0", "SLURM_LOCALID": "0"}, True),  # enroot's PyTorch hook, one task per node
        ({"FTENV_REPORT": "0"}, False),
        ({"FTENV_REPORT_SHOWN": "1"}, False),  # the entrypoint printed it
        ({"SLURM_LOCALID": "1"}, False),  # another task on this node prints it
        ({"LOCAL_RANK": "3"}, False),
    ],
)
def test_who_prints_the_report(env, shown):
    assert wanted(env) is shown


FAKE_CLI = """import os, sys, time
assert sys.argv[1:] == ["report"], sys.argv
print("== ftenv report: fake ==")
sys.stdout.flush()
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


@pytest.fixture
def fake_report(tmp_path):
    """`python -m ftenv.cli report` answered by a stand-in (the real one imports torch)."""
    (tmp_path / "ftenv").mkdir()
    (tmp_path / "ftenv/__init__.py").write_text("")
    (tmp_path / "ftenv/cli.py").write_text(FAKE_CLI)
    return {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path)}


def test_report_is_printed_to_stderr(fake_report, capsys):
    assert show_once("ftenv finetune", fake_report) is True
    out, err = capsys.readouterr()
    assert out == "" and err == "== ftenv report: fake ==\n"


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"FAKE_RC": "3"}, "exit 3"),
        ({"FAKE_SLEEP": "30", "FTENV_REPORT_TIMEOUT": "2"}, "no answer within 2 s (FTENV_REPORT_TIMEOUT)"),
    ],
)
def test_a_failing_or_hanging_report_is_named_and_passed_over(fake_report, capsys, env, reason):
    assert show_once("ftenv finetune", {**fake_report, **env}) is True
    err = capsys.readouterr().err
    assert "== ftenv report: fake ==" in err
    assert f"ftenv finetune: the start-up report failed ({reason}); going on without it" in err


def test_selfcheck_prints_it_in_process_with_the_compile_line_it_passes(capsys):
    line = compile_setting.report_line({variables.COMPILE: "regional"})  # not this process's setting
    assert show_once("ftenv selfcheck", {}, compile_line=line) is True
    err = capsys.readouterr().err
    assert "== ftenv report:" in err and f"\n{line}\n" in err


# --- `ftenv finetune` itself ------------------------------------------------------------------


@pytest.fixture
def launcher(monkeypatch, tmp_path):
    """ftenv finetune with the report and the trainer replaced by recorders; returns the argv."""
    for key in [k for k in os.environ if k.startswith(("SLURM_", "PET_", "FTENV_REPORT"))]:
        monkeypatch.delenv(key, raising=False)
    for key in ("MASTER_ADDR", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(startup, "_subprocess", lambda env: ("== ftenv report: fake ==\n", None))
    monkeypatch.setattr(
        finetune_command, "watched", lambda plan: print("TRAINER STARTS", file=sys.stderr) or 0
    )
    monkeypatch.chdir(tmp_path)  # the command line's relative paths start here
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.yaml").write_text("model: FunASRNano\n")
    (tmp_path / "model/model.pt").write_bytes(b"")
    with wave.open(str(tmp_path / "a.wav"), "wb") as w:  # one second: the data check reads it
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000), w.writeframes(bytes(32000))
    line = (
        '{"messages": [{"role": "user", "content": "<|startofspeech|>!a.wav<|endofspeech|>"}, '
        '{"role": "assistant", "content": "x"}], "speech_length": 100, "text_length": 1}'
    )
    for name in ("train.jsonl", "val.jsonl"):
        (tmp_path / name).write_text(line + "\n")
    return ["finetune", "--model-dir", "model", "--train", "train.jsonl", "--valid", "val.jsonl",
            "--output-dir", "out", "--gpus-per-node", "1"]  # fmt: skip


def test_finetune_prints_the_report_before_torchrun(launcher, capsys):
    assert cli.main(launcher) == 0
    err = capsys.readouterr().err
    assert err.count("== ftenv report: fake ==") == 1
    assert (
        err.index("== ftenv report: fake ==")
        < err.index("ftenv finetune: running")
        < err.index("TRAINER STARTS")
    )


@pytest.mark.parametrize(
    "env", [{"FTENV_REPORT_SHOWN": "1"}, {"FTENV_REPORT": "0"}, {"SLURM_LOCALID": "1"}, {"DRY": "1"}]
)
def test_finetune_leaves_it_out_when_shown_skipped_other_rank_or_dry_run(launcher, capsys, monkeypatch, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    argv = [*launcher, "--dry-run"] if "DRY" in env else launcher
    assert cli.main(argv) == 0
    assert "== ftenv report" not in capsys.readouterr().err


def test_the_entrypoint_marks_the_report_as_shown(tmp_path):
    """docker/entrypoint.sh exports the variable ftenv.report.startup reads, after printing the report."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ftenv").write_text("#!/bin/sh\necho '== ftenv report: fake ==' >&2\n")
    (bin_dir / "ftenv").chmod(0o755)
    entrypoint = Path(__file__).resolve().parents[3] / "docker/entrypoint.sh"

    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    proc = subprocess.run(
        ["sh", str(entrypoint), "sh", "-c", f"echo ${variables.REPORT_SHOWN}"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout.strip() == "1" and "== ftenv report: fake ==" in proc.stderr
    skipped = subprocess.run(
        ["sh", str(entrypoint), "sh", "-c", f"echo ${variables.REPORT_SHOWN}"],
        capture_output=True, text=True, env={**env, "FTENV_REPORT": "0"},
    )  # fmt: skip
    assert skipped.stdout.strip() == "" and "fake" not in skipped.stderr
