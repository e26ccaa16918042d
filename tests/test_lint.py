"""Every tracked file is linted: ruff (which honours .gitignore and skips what it ignores) sees every
tracked Python file, and the Makefile's shellcheck sees every tracked shell script. Shown failing on
a scratch repository whose .gitignore hides a tracked package folder named build/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

RUFF = Path(sys.executable).with_name("ruff")


def unlinted_python(repo: Path) -> list[str]:
    """Tracked *.py files that `ruff check .` would not look at."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split()
    shown = subprocess.run(
        [str(RUFF), "check", "--show-files", "."], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    linted = {Path(line.strip()).resolve() for line in shown.splitlines() if line.strip().endswith(".py")}
    return sorted(f for f in tracked if (repo / f).resolve() not in linted)


def shell_scripts(repo: Path) -> list[str]:
    """Tracked files that are shell scripts, by name or by their first line."""
    found = []
    for f in subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True).stdout.split():
        path = repo / f
        head = path.read_bytes()[:64] if path.is_file() else b""
        if f.endswith(".sh") or head.startswith((b"#!/bin/sh", b"#!/bin/bash", b"#!/usr/bin/env bash")):
            found.append(f)
    return sorted(found)


def test_ruff_sees_every_tracked_python_file():
    assert unlinted_python(ROOT) == []
    assert len(subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True).stdout.split()) > 50


def test_shellcheck_sees_every_tracked_shell_script():
    recipe = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    covered = subprocess.run(
        ["git", "ls-files", "*.sh", "*.sbatch"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert "shellcheck $$(git ls-files '*.sh' '*.sbatch') .ci/run" in recipe
    assert shell_scripts(ROOT) == sorted([*covered, ".ci/run"])


@pytest.mark.skipif(not shutil.which("git"), reason="needs git")
def test_a_tracked_file_under_an_ignored_folder_is_found(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pkg/build").mkdir(parents=True)
    (tmp_path / "pkg/build/check.py").write_text("x = 1\n")
    (tmp_path / "pkg/ok.py").write_text("y = 2\n")
    (tmp_path / ".gitignore").write_text("build/\n")  # unanchored, as this repository had it
    subprocess.run(["git", "add", "-f", "."], cwd=tmp_path, check=True)
    assert unlinted_python(tmp_path) == ["pkg/build/check.py"]
    (tmp_path / ".gitignore").write_text("/build/\n")  # anchored to the root
    assert unlinted_python(tmp_path) == []
