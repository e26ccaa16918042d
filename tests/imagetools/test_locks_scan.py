"""The per-layer locks (torch stack, then the rest) and the vulnerability scan's policy and messages.

The layer split is what keeps the torch layer's digest across a FunASR bump (docs/releasing.md,
"Layers"); tests/container/test_layers.py shows that on built images. The scan runs grype; here a
stand-in grype on PATH answers as the real one does, so every outcome (clean, a finding, no grype,
an unreachable database) is exercised without network.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ftenv.stack import versions
from imagetools import locks
from imagetools.release import scan
from support import ROOT

LOCK = (ROOT / "docker/locks/cu130.txt").read_text()


def _names(text: str) -> set[str]:
    return set(locks.parse(text)[1])


def test_every_pin_is_in_exactly_one_layer_verbatim():
    layers = locks.split(LOCK, "cu130.txt")
    torch, rest = _names(layers["torch"]), _names(layers["rest"])
    assert torch and rest and not torch & rest
    assert torch | rest == _names(LOCK)
    entries = locks.parse(LOCK)[1]
    for layer in layers.values():
        for name, entry in locks.parse(layer)[1].items():
            assert entry == entries[name]  # hashes and markers copied as they are


def test_the_torch_layer_holds_the_torch_stack_and_what_only_it_needs():
    torch = _names(locks.split(LOCK, "cu130.txt")["torch"])
    assert {"torch", "torchaudio", "triton", "nvidia-cudnn-cu13", "cuda-toolkit"} <= torch
    # torch's own requirements, and theirs (markupsafe comes only through jinja2): the closure.
    assert {"sympy", "mpmath", "networkx", "jinja2", "markupsafe", "filelock"} <= torch
    assert not {"funasr", "transformers", "modelscope", "torch-complex", "librosa"} & torch


def test_a_funasr_bump_changes_the_rest_and_leaves_the_torch_layer_as_it_was():
    before = locks.split(LOCK, "cu130.txt")
    pins, bumped = versions.load().default.python, LOCK
    for name in ("funasr", "transformers"):
        old = pins[name]
        bumped, n = re.subn(rf"(?m)^{name}=={re.escape(old)} ", f"{name}=={old}.post9 ", bumped)
        assert n == 1, name  # the lock pins what versions.toml pins
    after = locks.split(bumped, "cu130.txt")
    assert after["torch"] == before["torch"]
    assert after["rest"] != before["rest"]


def test_a_torch_bump_changes_the_torch_layer():
    torch = versions.load().default.torch
    bumped = re.sub(rf"(?m)^torch=={re.escape(torch)}", f"torch=={torch}.post9", LOCK)
    assert locks.split(bumped, "cu130.txt")["torch"] != locks.split(LOCK, "cu130.txt")["torch"]


def test_a_lock_without_the_torch_stack_is_refused():
    with pytest.raises(ValueError, match="nothing to split"):
        locks.split("funasr==0.0.1 \\\n    --hash=sha256:" + "a" * 64 + "\n", "x.txt")


# --- the scan ------------------------------------------------------------------------------------------


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
    env = os.environ | {"PYTHONPATH": str(ROOT / "scripts"), "PATH": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "imagetools", "scan", "cu130"], capture_output=True, text=True, env=env
    )
    assert r.returncode == scan.NOT_SCANNED
    assert "grype is not installed, so nothing was scanned" in r.stderr


def test_lock_sbom_cli_prints_json():
    env = os.environ | {"PYTHONPATH": str(ROOT / "scripts")}
    cmd = [sys.executable, "-m", "imagetools", "scan", "cu130", "--lock-sbom"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    assert json.loads(out)["components"]


def test_the_layer_check_changes_funasrs_entry_only_and_so_only_the_rest_layer():
    from imagetools.local import layers

    bumped = layers.bump_funasr_entry(LOCK)
    assert bumped != LOCK
    assert locks.parse(bumped)[1].keys() == locks.parse(LOCK)[1].keys()
    before, after = locks.split(LOCK, "cu130.txt"), locks.split(bumped, "cu130.txt")
    assert after["torch"] == before["torch"] and after["rest"] != before["rest"]


def _stack(*ids_and_holds):
    from imagetools.local.layers import Layer

    return [Layer(d, 1, f"step {d}", frozenset(h)) for d, h in ids_and_holds]


def test_layer_compare_passes_when_only_layers_above_the_torch_layer_change():
    from imagetools.local import layers

    before = _stack(("base", ""), ("apt", ""), ("t1", {"torch"}), ("r1", {"rest"}), ("f1", {"ftenv"}))
    after = _stack(("base", ""), ("apt", ""), ("t1", {"torch"}), ("r2", {"rest"}), ("f2", {"ftenv"}))
    problems, added = layers.compare(before, after)
    assert problems == [] and [x.diff_id for x in added] == ["r2", "f2"]


@pytest.mark.parametrize(
    ("after", "phrase"),
    [
        # the torch layer rebuilt (the whole lock in one layer, or the rest installed under it)
        (
            (("base", ""), ("apt", ""), ("t2", {"torch", "rest"}), ("f2", {"ftenv"})),
            "the torch layer changed",
        ),
        # something under the torch layer changed
        (
            (("base", ""), ("apt2", ""), ("t1", {"torch"}), ("r1", {"rest"})),
            "layer 1 (under the torch layer)",
        ),
        # the torch layer moved
        ((("base", ""), ("x", ""), ("apt", ""), ("t1", {"torch"})), "is layer 3 now, 2 before"),
        # no layer installs torch at all
        ((("base", ""), ("apt", "")), "no layer installs site-packages/torch"),
    ],
)
def test_layer_compare_fails_when_the_torch_layer_or_what_is_under_it_changes(after, phrase):
    from imagetools.local import layers

    before = _stack(("base", ""), ("apt", ""), ("t1", {"torch"}), ("r1", {"rest"}))
    problems, _ = layers.compare(before, _stack(*after))
    assert any(phrase in p for p in problems), problems


def test_parse_reads_both_via_forms_and_refuses_a_package_pinned_twice():
    text = (
        "# header\n"
        "A.B==1 \\\n    --hash=sha256:aa\n    # via torch\n"
        "c==2\n    # via\n    #   -r requirements.in\n    #   Torch_Audio\n"
        "torch==2\n"
    )
    header, entries, via = locks.parse(text)
    assert header == ["# header"]
    assert entries["a-b"] == "A.B==1 \\\n    --hash=sha256:aa\n    # via torch"
    assert via == {"a-b": {"torch"}, "c": {"torch-audio"}, "torch": set()}  # `-r file` is no package
    with pytest.raises(ValueError, match="lock pins a-b twice"):
        locks.parse(text + "a_b==3\n")


def test_check_and_write_of_the_layer_locks(tmp_path):
    (tmp_path / locks.LOCKS).mkdir(parents=True)
    (tmp_path / locks.LOCKS / "cu130.txt").write_text(LOCK)
    assert locks.check(tmp_path, ["cu128", "cu130"]) == [
        "docker/locks/cu128.txt missing: run `make lock`",  # and the next variant is still checked
        *(
            f"docker/locks/layers/cu130-{layer}.txt is not what cu130.txt derives: run `make lock`"
            for layer in locks.LAYERS
        ),
    ]
    locks.write(tmp_path, ["cu130"])
    assert locks.check(tmp_path, ["cu130"]) == []
    assert (tmp_path / "docker/locks/layers/cu130-torch.txt").read_text() == locks.split(
        LOCK, "docker/locks/cu130.txt"
    )["torch"]
    assert locks.check(tmp_path, ["cu128"]) == ["docker/locks/cu128.txt missing: run `make lock`"]
    (tmp_path / locks.LOCKS / "cu130.txt").write_text("funasr==1\n")
    assert locks.check(tmp_path, ["cu130", "cu128"]) == [
        "docker/locks/cu130.txt: no torch, triton, nvidia-* or cuda-* package: nothing to split",
        "docker/locks/cu128.txt missing: run `make lock`",
    ]


def test_locks_split_command_writes_then_checks(tmp_path, monkeypatch, capsys):
    """`python -m imagetools locks split [--write] [--variant V]`, in a scratch checkout."""
    from imagetools.__main__ import main

    (tmp_path / locks.LOCKS).mkdir(parents=True)
    for name in ("cu128", "cu130"):
        (tmp_path / locks.LOCKS / f"{name}.txt").write_text((ROOT / locks.LOCKS / f"{name}.txt").read_text())
    monkeypatch.setattr(locks, "ROOT", tmp_path)
    file = ["locks", "--file", str(ROOT / "versions.toml"), "split"]
    assert main([*file, "--variant", "cu130", "--write"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "wrote docker/locks/layers/cu130-torch.txt",
        "wrote docker/locks/layers/cu130-rest.txt",
    ]
    assert main([*file, "--variant", "cu130"]) == 0
    assert main(file) == 1  # cu128's layer locks are not written yet
    assert capsys.readouterr().err.splitlines() == [
        f"locks: docker/locks/layers/cu128-{layer}.txt is not what cu128.txt derives: run `make lock`"
        for layer in locks.LAYERS
    ]
    assert main([*file, "--write"]) == 0 and main(file) == 0
    for name in ("cu128", "cu130"):
        for layer in locks.LAYERS:
            path = locks.layer_path(name, layer)
            assert (tmp_path / path).read_text() == (ROOT / path).read_text()  # what the checkout commits
    with pytest.raises(SystemExit):
        main(["locks"])  # the action is required


def test_locks_command_reads_the_given_versions_file_and_explains_each_option(tmp_path, monkeypatch):
    import argparse

    from imagetools.__main__ import main

    only_cu130 = (ROOT / "versions.toml").read_text().split("[variants.cu128]", 1)[0]
    (tmp_path / "versions.toml").write_text(only_cu130)
    (tmp_path / locks.LOCKS).mkdir(parents=True)
    (tmp_path / locks.LOCKS / "cu130.txt").write_text(LOCK)
    monkeypatch.setattr(locks, "ROOT", tmp_path)
    assert main(["locks", "--file", str(tmp_path / "versions.toml"), "split", "--write"]) == 0
    written = sorted(p.name for p in (tmp_path / locks.LAYER_LOCKS).iterdir())
    assert written == ["cu130-rest.txt", "cu130-torch.txt"]  # the given file's variants only

    # `--help` says what the command, its action and each option do
    sub = argparse.ArgumentParser().add_subparsers()
    locks.add_parser(sub)
    command = sub.choices["locks"]
    (actions,) = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
    for choices, name in ((sub, "locks"), (actions, "split")):
        assert [(c.dest, bool(c.help)) for c in choices._choices_actions] == [(name, True)]
    options = [a for p in (command, actions.choices["split"]) for a in p._actions if a.dest != "help"]
    helps = {a.dest: a.help for a in options if a.option_strings}
    assert set(helps) == {"file", "variant", "write"} and all(helps.values()), helps
