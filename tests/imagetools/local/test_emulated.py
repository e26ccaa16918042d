"""The linux/arm64 image under emulation (`make image-arm64`, `make check-arm64`; imagetools.local.emulated):
its build command derives from versions.toml, its base is an arm64 stand-in under a local name, the
engine step brings qemu, and none of it is part of `make test`. The emulated build itself is slow
and recorded in docs/building-here.md, not run here."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from ftenv import variables
from ftenv.stack import versions
from imagetools import build_args as derived
from imagetools.local import build_and_run, emulated, engine, machine
from support import ROOT

V = versions.load(ROOT / "versions.toml")
ARM64 = emulated.FOREIGN["linux/arm64"]


def build_args_of(cmd: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--build-arg=").split("=", 1) for a in cmd if a.startswith("--build-arg="))


def test_the_arm64_build_is_the_local_podman_build_with_versions_toml_args_for_that_platform():
    cmd = emulated.build_command(V.default, emulated.foreign(V.default, "linux/arm64"), "abc1234", "NOW")
    assert cmd[:2] == ["podman", "build"] and cmd[-1] == str(ROOT)
    assert cmd.count("--platform=linux/arm64") == 1 and "--pull=never" in cmd
    base = "localhost/ftenv-standin-base:bookworm-arm64"
    assert ARM64.standin_base == base != machine.STANDIN_BASE
    expected = derived.build_args(V.default) | {
        "REVISION": "abc1234",
        "CREATED": "NOW",
        "BASE_IMAGE": base,
        variables.STANDIN_BASE: base,
    }
    assert build_args_of(cmd) == expected
    assert f"--label={machine.STANDIN_LABEL}={base}" in cmd
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "-t"] == ["localhost/ftenv:cu130-arm64"]


def test_the_amd64_build_keeps_its_own_standin_label():
    """podman_build labels the image with the base it was given, not always the amd64 stand-in."""
    choice = machine.Choice("podman", True, (), ())
    args = build_and_run.build_args(choice, V.default, "r", "c")
    assert f"--label={machine.STANDIN_LABEL}={machine.STANDIN_BASE}" in build_and_run.podman_build(
        choice, ["t"], args
    )


def test_only_a_platform_that_versions_toml_lists_for_the_variant_is_built():
    assert "linux/arm64" in V.default.platforms  # the release promises cu130 for GH200/GB200
    with pytest.raises(machine.Refusal, match="cu128 is built for linux/amd64, not linux/arm64"):
        emulated.foreign(V.variant("cu128"), "linux/arm64")
    amd64_only = dataclasses.replace(V.default, platforms=("linux/amd64",))
    with pytest.raises(machine.Refusal, match=r"versions\.toml"):
        emulated.foreign(amd64_only, "linux/arm64")
    with pytest.raises(machine.Refusal, match="no emulated build for linux/amd64"):
        emulated.foreign(V.default, "linux/amd64")


def test_the_check_runs_the_report_and_the_default_on_the_foreign_cpu():
    cpu, report, default = emulated.check_commands(V.default, ARM64)
    image = "localhost/ftenv:cu130-arm64"
    for cmd in (cpu, report, default):
        assert cmd[:2] == ["podman", "run"] and "--platform=linux/arm64" in cmd and "--pull=never" in cmd
    assert cpu[-3:] == [image, "uname", "-m"]
    assert report[-3:] == [image, "ftenv", "report"] and default[-1] == image
    # The entrypoint gives the report 60 s by default: too little under emulation.
    assert f"--env=FTENV_REPORT_TIMEOUT={emulated.EMULATED_TIMEOUT_S}" in default


@pytest.mark.parametrize(
    ("text", "enabled"), [("enabled\ninterpreter x\n", True), ("disabled\n", False), (None, False)]
)
def test_binfmt_registration_is_read_from_the_kernel(tmp_path, text, enabled):
    if text is not None:
        (tmp_path / "qemu-aarch64").write_text(text)
    assert emulated.binfmt_enabled(ARM64, tmp_path) is enabled


def test_without_root_an_unregistered_qemu_stops_with_the_commands_to_run(monkeypatch):
    monkeypatch.setattr(emulated, "binfmt_enabled", lambda target: False)
    monkeypatch.setattr(emulated.os, "geteuid", lambda: 1000)
    with pytest.raises(machine.Refusal, match=r"update-binfmts --enable qemu-aarch64.*engine --for emulate"):
        emulated.enable_binfmt(ARM64)


def test_the_emulated_build_gets_qemu_and_binfmt_support_from_the_engine_step():
    assert set(engine.packages("emulate")) == set(engine.ENGINE_PACKAGES) | {
        "qemu-user-static",
        "binfmt-support",
    }
    assert "qemu-user-static" not in engine.packages("run") + engine.packages("test")


@pytest.mark.skipif(os.geteuid() != 0, reason="installing needs root")
def test_a_machine_without_qemu_installs_it_with_apt(tmp_path):
    bin_dir, record = tmp_path / "bin", tmp_path / "apt-calls"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    (bin_dir / "apt-get").chmod(0o755)
    env = {"PATH": str(bin_dir), "PYTHONPATH": str(ROOT / "scripts"), "HOME": os.environ.get("HOME", "/")}
    r = subprocess.run(
        ["python3", "-m", "imagetools", "engine", "--for", "emulate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "qemu-user-static and binfmt-support for the emulated build" in r.stderr
    assert set(record.read_text().splitlines()[1].split()[3:]) == set(engine.packages("emulate"))


def make_dry(*targets: str) -> list[str]:
    return subprocess.run(
        # --no-print-directory: under `make test` this make is a sub-make, which prints its
        # "Entering directory" lines by default.
        ["make", "-n", "--no-print-directory", *targets, "VARIANT=cu130"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def test_make_image_arm64_sets_up_qemu_then_builds_under_the_build_lock():
    dry = make_dry("image-arm64")
    assert "imagetools engine --for emulate" in dry[0]
    # flock runs its command directly: a VAR=value word there would be taken for the command.
    assert dry[1].startswith("flock /tmp/ftenv-build.lock env PYTHONPATH=scripts python3") and dry[
        1
    ].endswith("imagetools emulated build --variant cu130 --platform linux/arm64")
    assert make_dry("check-arm64")[-1].endswith(
        "imagetools emulated check --variant cu130 --platform linux/arm64"
    )


def test_make_test_never_builds_the_emulated_image():
    assert not [line for line in make_dry("test") if "emulated" in line or "--for emulate" in line]


# Records each call; `image inspect` finds nothing (so the stand-in is made); `import` reads its tarball.
FAKE_PODMAN = r"""#!/usr/bin/env python3
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(["podman", *sys.argv[1:]]) + "\n")
if sys.argv[1] == "image":
    sys.exit(1)
if sys.argv[1] == "import":
    sys.stdin.buffer.read()
"""
FAKE_DEBOOTSTRAP = r"""#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(["debootstrap", *sys.argv[1:]]) + "\n")
(Path(sys.argv[-2]) / "etc").mkdir(parents=True)  # ... SUITE ROOTFS MIRROR
"""


def test_the_arm64_standin_is_debootstrapped_and_imported_for_arm64(tmp_path, monkeypatch):
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name, text in [("podman", FAKE_PODMAN), ("debootstrap", FAKE_DEBOOTSTRAP)]:
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setattr(emulated, "enable_binfmt", lambda target: None)
    monkeypatch.setattr(emulated, "prefetch", lambda variant, target: emulated.wheelhouse_mounts(target))
    assert emulated.build(V.default, ARM64, []) == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    boot = next(c for c in calls if c[0] == "debootstrap")
    assert "--arch=arm64" in boot
    imported = next(c for c in calls if c[1] == "import")
    assert imported[imported.index("--arch") + 1] == "arm64" and imported[-1] == ARM64.standin_base
    assert calls[-1][:2] == ["podman", "build"] and "--platform=linux/arm64" in calls[-1]
    assert f"--volume={ARM64.wheelhouse}:/wheelhouse:ro" in calls[-1]


def test_the_wheels_are_downloaded_natively_for_aarch64_from_the_hashed_lock():
    """pip under emulation downloads at about 1 MB/s here: the host's pip fetches the lock first."""
    lock_cmd = emulated.prefetch_command(V.default, ARM64)
    assert lock_cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in lock_cmd
    assert "--require-hashes" in lock_cmd and lock_cmd[-2:] == ["-r", str(ROOT / "docker/locks/cu130.txt")]
    platforms = [a.removeprefix("--platform=") for a in lock_cmd if a.startswith("--platform=")]
    assert platforms[0] == "manylinux_2_36_aarch64" and "manylinux_2_28_aarch64" in platforms  # torch's tag
    assert all("aarch64" in p for p in platforms) and "--python-version=3.11" in lock_cmd
    assert lock_cmd[lock_cmd.index("-d") + 1] == str(ARM64.wheelhouse) == "/var/tmp/ftenv-wheels-arm64"


def test_without_a_host_pip_the_build_downloads_under_emulation(monkeypatch, capsys):
    monkeypatch.setattr(emulated.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1))
    assert emulated.prefetch(V.default, ARM64) == []
    assert "has no pip: the build downloads its wheels under emulation" in capsys.readouterr().err
