"""`make run` sets itself up on a fresh machine (imagetools.local.engine): with podman and docker hidden
from PATH, a recording apt-get shows what is installed; a Docker host and a podman host are left
alone; a machine that cannot install says the exact command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from imagetools.local import engine
from support import ROOT


def fake_bin(tmp_path: Path, docker_answers: bool = False, podman: bool = False) -> tuple[Path, Path]:
    """A PATH of python3, a recording apt-get and, if asked, a docker whose daemon answers or a podman."""
    bin_dir, record = tmp_path / "bin", tmp_path / "apt-calls"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    scripts = {"apt-get": f'#!/bin/sh\necho "$@" >> {record}\n'}
    if docker_answers:
        scripts["docker"] = '#!/bin/sh\n[ "$1" = info ] && echo 28.2.2\n'
    if podman:
        scripts["podman"] = "#!/bin/sh\nexit 0\n"
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir, record


def run_engine(bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    # podman and docker hidden: PATH is the fake bin only (the machine's own podman is in /usr/bin).
    env = {
        "PATH": str(bin_dir),
        "PYTHONPATH": str(ROOT / "scripts"),
        "HOME": os.environ.get("HOME", "/"),
    }
    return subprocess.run(
        ["python3", "-m", "imagetools", "engine", *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="installing needs root")
def test_a_fresh_machine_gets_podman_from_apt_and_says_so_in_one_line(tmp_path):
    bin_dir, record = fake_bin(tmp_path)
    r = run_engine(bin_dir)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("\n") == 1 and "installing podman and its tools with apt-get" in r.stderr
    calls = record.read_text().splitlines()
    assert calls[0] == "update -qq"
    assert calls[1].split()[:3] == ["install", "-y", "-qq"]
    assert set(calls[1].split()[3:]) == set(engine.ENGINE_PACKAGES)


@pytest.mark.skipif(os.geteuid() != 0, reason="installing needs root")
def test_the_tests_also_get_tini_and_slurm(tmp_path):
    bin_dir, record = fake_bin(tmp_path, docker_answers=True)  # the tests drive podman all the same
    assert run_engine(bin_dir, "--for", "test").returncode == 0
    installed = set(record.read_text().splitlines()[1].split()[3:])
    assert installed == set(engine.ENGINE_PACKAGES) | set(engine.TEST_PACKAGES)


@pytest.mark.parametrize(("docker_answers", "podman"), [(True, False), (False, True)])
def test_a_machine_with_an_engine_is_left_alone(tmp_path, docker_answers, podman):
    bin_dir, record = fake_bin(tmp_path, docker_answers=docker_answers, podman=podman)
    r = run_engine(bin_dir)
    assert (r.returncode, r.stderr, record.exists()) == (0, "", False)


def test_a_failing_apt_get_stops_the_run_with_its_exit_code(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(engine, "missing_commands", lambda purpose: ["podman"])
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0)
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(engine.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 100))
    assert engine.ensure("run") == 100
    assert "`apt-get update -qq` failed (exit 100)" in capsys.readouterr().err


def test_without_root_it_stops_with_the_command_to_run(tmp_path, monkeypatch, capsys):
    bin_dir, record = fake_bin(tmp_path)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    assert engine.ensure("run") == 2
    err = capsys.readouterr().err
    assert f"sudo sh -c '{engine.apt_command('run')}'" in err and "Start the Docker daemon" in err
    assert not record.exists()


def test_make_run_sets_up_the_engine_before_it_builds():
    """The Makefile's run target: the engine step first, then the image, then the run."""
    dry = subprocess.run(
        ["make", "-n", "run", "VARIANT=cu130"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    steps = [i for i, line in enumerate(dry) if "imagetools engine --for run" in line]
    builds = [
        i for i, line in enumerate(dry) if "build_image.py" in line or ("make" in line and "image" in line)
    ]
    runs = [i for i, line in enumerate(dry) if "imagetools local run" in line]
    assert steps and runs and steps[0] < runs[0]
    assert not builds or steps[0] < builds[0]
