"""The vulnerability scan's policy and messages: a stand-in grype on PATH answers as the real one
does, so every outcome (clean, a finding, no grype, an unreachable database) is exercised without
network.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ftenv.stack import versions
from imagetools import locks
from imagetools.release import scan
from support import ROOT, child_env

LOCK = (ROOT / "docker/locks/cu130.txt").read_text()


def _names(text: str) -> set[str]:
    return set(locks.parse(text)[1])


def test_the_lock_sbom_has_one_pypi_component_per_pin():
    sbom = scan.lock_sbom(LOCK, "cu130 lock")
    assert sbom["bomFormat"] == "CycloneDX"
    purls = {c["purl"] for c in sbom["components"]}
    assert len(purls) == len(_names(LOCK))
    v = versions.load().default
    assert f"pkg:pypi/torch@{v.torch}" in purls and f"pkg:pypi/funasr@{v.python['funasr']}" in purls


FINDING = "NAME  INSTALLED  FIXED IN  TYPE  VULNERABILITY  SEVERITY\nfoo 1.0 1.1 python CVE-1 Critical"
GRYPE = {
    "clean": (0, "No vulnerabilities found"),
    "finding": (
        1,
        FINDING + "\n1 error occurred:\n\t* discovered vulnerabilities at or above the severity threshold",
    ),
    "no-db": (
        1,
        "failed to load vulnerability db: unable to update vulnerability database: Get "
        '"https://grype.anchore.io/databases/v6/latest.json": dial tcp: lookup: no such host',
    ),
    "crash": (2, "panic: something else"),
}


def _fake_grype(tmp_path: Path, case: str) -> Path:
    rc, text = GRYPE[case]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "out.txt").write_text(text)
    exe = bin_dir / "grype"
    exe.write_text(f'#!/bin/sh\necho "$@" >"{tmp_path}/args"\ncat "{tmp_path}/out.txt"\nexit {rc}\n')
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize(
    ("case", "code", "says"),
    [
        ("clean", scan.OK, "scan: lock docker/locks/cu130.txt: OK"),
        ("finding", scan.FINDINGS, "FAIL (a critical finding with a fix)"),
        ("no-db", scan.NOT_SCANNED, "the vulnerability database is unreachable from this machine"),
        ("crash", scan.NOT_SCANNED, "grype failed (exit 2)"),
    ],
)
def test_make_scan_outcomes(tmp_path, capsys, case, code, says):
    exe = _fake_grype(tmp_path, case)
    assert scan.scan(ROOT, "cu130", None, grype_bin=str(exe)) == code
    out = capsys.readouterr()
    assert says in out.out + out.err
    args = (tmp_path / "args").read_text().split()
    # the release policy: fail on critical, only findings that have a fix
    assert args[0].startswith("sbom:") and args[1:5] == ["--fail-on", "critical", "--only-fixed", "-o"]


def test_make_scan_without_grype_says_so_and_is_not_a_pass(tmp_path):
    env = child_env(PATH=str(tmp_path))
    r = subprocess.run(
        [sys.executable, "-m", "imagetools", "scan", "cu130"], capture_output=True, text=True, env=env
    )
    assert r.returncode == scan.NOT_SCANNED
    assert "grype is not installed, so nothing was scanned" in r.stderr


def test_lock_sbom_cli_prints_json():
    env = child_env()
    cmd = [sys.executable, "-m", "imagetools", "scan", "cu130", "--lock-sbom"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    assert json.loads(out)["components"]
