"""The per-layer locks (torch stack, then the rest), cut from each variant's lock.

The layer split is what keeps the torch layer's digest across a FunASR bump (docs/releasing.md,
"Layers"); tests/container/test_layers.py shows that on built images.
"""

from __future__ import annotations

import re

import pytest

from ftenv.stack import versions
from imagetools import locks
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
    names = list(versions.load().variants)
    for name in names:
        (tmp_path / locks.LOCKS / f"{name}.txt").write_text((ROOT / locks.LOCKS / f"{name}.txt").read_text())
    monkeypatch.setattr(locks, "ROOT", tmp_path)
    file = ["locks", "--file", str(ROOT / "versions.toml"), "split"]
    assert main([*file, "--variant", "cu130", "--write"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "wrote docker/locks/layers/cu130-torch.txt",
        "wrote docker/locks/layers/cu130-rest.txt",
    ]
    assert main([*file, "--variant", "cu130"]) == 0
    assert main(file) == 1  # the other variants' layer locks are not written yet
    assert capsys.readouterr().err.splitlines() == [
        f"locks: docker/locks/layers/{name}-{layer}.txt is not what {name}.txt derives: run `make lock`"
        for name in names
        if name != "cu130"
        for layer in locks.LAYERS
    ]
    assert main([*file, "--write"]) == 0 and main(file) == 0
    for name in names:
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


@pytest.mark.parametrize("name", [n for n, v in versions.load().variants.items() if not v.torch_index])
def test_every_pypi_variant_pins_the_rest_as_the_default_does(name):
    """The rest layer installs the same packages in every variant whose lock is all PyPI (`make lock`
    starts a new variant's lock from the default's), so a node that has one pulls nothing new for it
    but the build's own files (docs/releasing.md, "Layers")."""
    default = versions.load().default.name
    rest = {
        variant: locks.parse((ROOT / locks.layer_path(variant, "rest")).read_text())[1]
        for variant in (default, name)
    }
    assert rest[name] == rest[default]
