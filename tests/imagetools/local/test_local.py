"""Local builds and runs (`make run`, `make image`): engine x registry x GPU, and what gets written.

The choice is a pure function, checked against a literal table for every combination. The build
itself runs against stand-in `docker`/`podman`/`debootstrap` commands that log what they are asked
to do: nothing built here may take the name of an image that a registry serves.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys

import pytest

from ftenv import variables
from ftenv.report import render
from ftenv.stack import versions
from ftenv.trainer import compile_setting
from imagetools import bake as bake_file
from imagetools import tags
from imagetools.local import build_and_run, machine
from support import ROOT
from support import fake_engines as fakes

V = versions.load(ROOT / "versions.toml")

DOCKER_GPU = ("--gpus", "all", "--ipc=host")
PODMAN_GPU = ("--device", "nvidia.com/gpu=all", "--ipc=host")
REFUSED = "refused"
# GPU state (nvidia-smi lists one, a CDI spec names nvidia.com/gpu) -> run flags, per engine.
GPU_FLAGS = {
    "docker": {
        (False, False): (),
        (True, False): DOCKER_GPU,
        (False, True): DOCKER_GPU,
        (True, True): DOCKER_GPU,
    },
    "podman": {
        (False, False): (),
        (True, False): REFUSED,
        (False, True): PODMAN_GPU,
        (True, True): PODMAN_GPU,
    },
}
# (docker daemon answers, podman installed) -> engine.
ENGINES = {(True, True): "docker", (True, False): "docker", (False, True): "podman", (False, False): REFUSED}


@pytest.mark.parametrize(
    "docker, podman, registry, smi, cdi", list(itertools.product([True, False], repeat=5))
)
def test_every_combination_of_engine_registry_and_gpu(docker, podman, registry, smi, cdi):
    m = machine.Machine(docker, podman, registry, smi, cdi)
    engine = ENGINES[(docker, podman)]
    flags = GPU_FLAGS.get(engine, {}).get((smi, cdi))
    if REFUSED in (engine, flags):
        with pytest.raises(machine.Refusal) as e:
            machine.choose(m)
        assert ("make engine" if engine == REFUSED else "nvidia-ctk cdi generate") in str(e.value)
        return
    choice = machine.choose(m)
    assert (choice.engine, choice.standin, choice.run_flags) == (engine, not registry, flags)
    said = "\n".join(choice.said)
    assert ("stand-in" in said) == (not registry)
    assert ("GPUs    passed: " if flags else "GPUs    not passed") in said


@pytest.mark.parametrize(
    "gpus, base, registry, expected",
    [
        ("none", "auto", True, (False, ())),  # GPUs present, kept out on request
        ("all", "auto", True, (False, PODMAN_GPU)),  # passed without a CDI spec when asked
        ("auto", "standin", True, (True, PODMAN_GPU)),
        ("auto", "upstream", False, REFUSED),
        ("auto", "upstream", True, (False, PODMAN_GPU)),
    ],
)
def test_requests_override_the_detection(gpus, base, registry, expected):
    m = machine.Machine(False, True, registry, True, gpus != "all")
    if expected == REFUSED:
        with pytest.raises(machine.Refusal, match="cannot be pulled"):
            machine.choose(m, machine.Request(base=base, gpus=gpus))
        return
    choice = machine.choose(m, machine.Request(base=base, gpus=gpus))
    assert (choice.standin, choice.run_flags) == expected


@pytest.mark.parametrize(
    "engine, docker, podman, expected",
    [
        ("podman", True, True, "podman"),  # `make test`: its container tests drive podman
        ("docker", True, True, "docker"),
        ("docker", False, True, "no Docker daemon answers"),
        ("podman", True, False, "podman is not installed"),
    ],
)
def test_an_engine_asked_for(engine, docker, podman, expected):
    m = machine.Machine(docker, podman, False, False, False)
    if expected in ENGINES.values():
        assert machine.choose(m, machine.Request(engine=engine)).engine == expected
    else:
        with pytest.raises(machine.Refusal, match=expected):
            machine.choose(m, machine.Request(engine=engine))


def test_a_run_does_not_speak_of_the_base():
    choice = machine.choose(machine.Machine(False, True, None, False, False))
    assert not choice.standin and [line.split()[0] for line in choice.said] == ["engine", "GPUs"]


def test_the_standin_has_a_local_name_of_its_own():
    assert build_and_run.STANDIN_BASE.startswith("localhost/")
    assert all(v.base_image != build_and_run.STANDIN_BASE for v in V.variants.values())
    assert build_and_run.local_tag(V.default).startswith("localhost/")


@pytest.mark.parametrize(
    "tag, expected",
    [
        ("ftenv-x:test", "localhost/ftenv-x:test"),
        ("localhost/ftenv-x:test", "localhost/ftenv-x:test"),
        ("team/ftenv:dev", "localhost/team/ftenv:dev"),
        (tags.image_ref(V.default), REFUSED),
        (V.default.base_image, REFUSED),
        ("localhost:5000/ftenv:dev", REFUSED),
    ],
)
def test_tags_stay_under_localhost(tag, expected):
    if expected == REFUSED:
        with pytest.raises(machine.Refusal, match="localhost/ only"):
            build_and_run.local_name(tag)
    else:
        assert build_and_run.local_name(tag) == expected


def test_cdi_spec_detection(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (a / "other.yaml").write_text('cdiVersion: "0.5.0"\nkind: example.com/fpga\n')
    assert not machine.cdi_spec_names_gpu((a, b))
    (a / "nvidia.yaml").write_text('cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices: []\n')
    assert machine.cdi_spec_names_gpu((a, b))
    (a / "nvidia.yaml").unlink()
    b.mkdir()
    (b / "nvidia.json").write_text(json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu"}))
    assert machine.cdi_spec_names_gpu((a, b))


def test_engine_settings_only_where_needed(monkeypatch):
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    monkeypatch.setattr(machine, "needs_engine_conf", lambda: False)
    assert "CONTAINERS_CONF" not in machine.engine_env("podman")
    monkeypatch.setattr(machine, "needs_engine_conf", lambda: True)
    assert machine.engine_env("podman")["CONTAINERS_CONF"] == str(machine.ENGINE_CONF)
    assert "CONTAINERS_CONF" not in machine.engine_env("docker")
    monkeypatch.setenv("CONTAINERS_CONF", "/elsewhere.conf")  # a setting of the user's (or CI's) wins
    assert machine.engine_env("podman")["CONTAINERS_CONF"] == "/elsewhere.conf"


def test_a_non_root_user_never_gets_the_build_machine_settings(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert not machine.needs_engine_conf()


def test_report_line_only_on_a_standin(monkeypatch):
    from ftenv.attention.facts import Facts

    f = Facts(image="localhost/ftenv:cu130")
    monkeypatch.delenv(variables.STANDIN_BASE, raising=False)
    assert "stand-in" not in render.render_text(f, render.assess(f), compile_setting.report_line())
    monkeypatch.setenv(variables.STANDIN_BASE, build_and_run.STANDIN_BASE)
    line = render.render_text(f, render.assess(f), compile_setting.report_line()).splitlines()[1]
    assert (
        line
        == f"base    built on a stand-in base ({build_and_run.STANDIN_BASE}): for tests, not for training"
    )


# --- the build, against stand-in engines -----------------------------------------------------------


@pytest.fixture
def fake_engines(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    fakes.install(bin_dir)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("CONTAINERS_CONF", str(machine.ENGINE_CONF))
    for name in (*fakes.SETTINGS, "DOCKER_BUILDKIT"):
        monkeypatch.delenv(name, raising=False)
    return (lambda: fakes.calls(log)), log


def written_names(calls: list[list[str]]) -> list[str]:
    """Every image name the engine was asked to create: import targets, build tags, `tag` targets."""
    names = []
    for call in calls:
        _engine, *a = call
        if a[:1] == ["import"]:
            names.append(a[-1])
        elif a[:1] == ["build"]:
            names += [a[i + 1] for i, x in enumerate(a) if x in ("-t", "--tag")]
        elif a[:1] == ["tag"]:
            names += a[2:]
    return names


def test_podman_without_registry_builds_on_the_standin_under_local_names_only(fake_engines):
    calls, _ = fake_engines
    assert build_and_run.build(V.default, ["ftenv-mine:test"], ["--build-arg=X=1"]) == 0
    log = calls()
    assert log[:2] == [
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        ["podman", "pull", V.default.base_image],
    ]
    names = written_names(log)
    assert names == [build_and_run.STANDIN_BASE, "localhost/ftenv:cu130", "localhost/ftenv-mine:test"]
    assert all(n.startswith("localhost/") for n in names)
    build = next(c for c in log if c[1] == "build")
    assert f"--build-arg=BASE_IMAGE={build_and_run.STANDIN_BASE}" in build
    assert f"--build-arg={variables.STANDIN_BASE}={build_and_run.STANDIN_BASE}" in build
    assert f"--label={build_and_run.STANDIN_LABEL}={build_and_run.STANDIN_BASE}" in build
    assert "--pull=never" in build and build[-2:] == ["--build-arg=X=1", str(ROOT)]


def test_a_trial_build_leaves_the_variants_tag_alone(fake_engines):
    """What the layer check's rebuild does: only its own tag, so the image under test keeps its name."""
    calls, _ = fake_engines
    assert build_and_run.build(V.default, ["ftenv-layer-check:rebuilt"], [], default_tag=False) == 0
    built = [n for n in written_names(calls()) if n != build_and_run.STANDIN_BASE]
    assert built == ["localhost/ftenv-layer-check:rebuilt"]
    with pytest.raises(SystemExit, match="needs a --tag"):
        build_and_run.build(V.default, [], [], default_tag=False)


def test_a_standin_under_the_upstream_name_is_named_and_not_used(fake_engines, monkeypatch, capsys):
    """A store where an earlier build imported its stand-in as the real base's name."""
    calls, _ = fake_engines
    monkeypatch.setenv("FAKE_LOCAL_IMAGE", V.default.base_image)
    assert build_and_run.build(V.default, [], []) == 0
    err = capsys.readouterr().err
    assert "is a stand-in, not NVIDIA's image (no CUDA_VERSION)" in err
    assert f"`podman rmi {V.default.base_image}`" in err
    build = next(c for c in calls() if c[1] == "build")
    assert f"--build-arg=BASE_IMAGE={build_and_run.STANDIN_BASE}" in build


def test_podman_with_registry_builds_on_the_real_base_unmarked(fake_engines, monkeypatch):
    calls, _ = fake_engines
    monkeypatch.setenv("PULL_OK", "1")
    assert build_and_run.build(V.default, [], []) == 0
    log = calls()
    build = next(c for c in log if c[1] == "build")
    assert written_names(log) == ["localhost/ftenv:cu130"]
    assert f"--build-arg=BASE_IMAGE={V.default.base_image}" in build
    assert not any(build_and_run.STANDIN_LABEL in x or variables.STANDIN_BASE in x for x in build)


@pytest.mark.parametrize("pull_ok", [False, True])
def test_docker_bakes_the_variant_target_for_a_local_load(fake_engines, monkeypatch, pull_ok):
    calls, log_path = fake_engines
    monkeypatch.setenv("DAEMON", "1")
    monkeypatch.setenv("BUILDX", "1")
    if pull_ok:
        monkeypatch.setenv("PULL_OK", "1")
    monkeypatch.setattr(build_and_run.platform, "machine", lambda: "x86_64")
    assert build_and_run.build(V.default, [], []) == 0
    log = calls()
    assert {c[0] for c in log} == {"docker"}
    bake = next(c for c in log if c[1:3] == ["buildx", "bake"])
    assert bake[-2:] == ["--load", V.default.name]
    target = json.loads(log_path.with_name("bake.json").read_text())["target"][V.default.name]
    committed = bake_file.resolve_target(json.loads((ROOT / bake_file.BAKE_FILE).read_text()), V.default.name)
    assert target["platforms"] == ["linux/amd64"] and target["tags"] == ["localhost/ftenv:cu130"]
    assert not {"annotations", "attest", "cache-to"} & target.keys()
    assert target["dockerfile"] == committed["dockerfile"]
    assert {
        k: target["labels"][k] for k in committed["labels"] if "revision" not in k and "created" not in k
    } == {k: v for k, v in committed["labels"].items() if "revision" not in k and "created" not in k}
    if pull_ok:
        assert target["args"]["BASE_IMAGE"] == V.default.base_image and target["pull"] is True
        assert build_and_run.STANDIN_LABEL not in target["labels"] and written_names(log) == []
    else:
        assert target["args"]["BASE_IMAGE"] == build_and_run.STANDIN_BASE and target["pull"] is False
        assert target["labels"][build_and_run.STANDIN_LABEL] == build_and_run.STANDIN_BASE
        assert written_names(log) == [build_and_run.STANDIN_BASE]


def test_the_standin_script_refuses_an_upstream_name(fake_engines):
    import subprocess

    r = subprocess.run(
        [str(ROOT / "scripts/make-standin-base.sh"), "podman", V.default.base_image],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "never under a registry's name" in r.stderr


def test_choose_prints_what_run_would_use_and_plan_still_does(fake_engines, capsys):
    """`local choose` prints the choice and starts nothing; `local plan`, its former name, still works."""
    calls, _ = fake_engines
    parser = argparse.ArgumentParser()
    build_and_run.add_parser(parser.add_subparsers())
    printed = []
    for action in ("choose", "plan"):
        assert build_and_run.main(parser.parse_args(["local", action, "--gpus", "none"])) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and "GPUs    not passed: GPUS=none" in printed[0]
    assert printed[0].splitlines()[0].startswith("engine  ")
    assert not [c for c in calls() if c[1] == "run"]


def test_run_passes_the_gpus_and_says_so(fake_engines, monkeypatch, capsys, tmp_path):
    calls, _ = fake_engines
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-x)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("DAEMON", "1")
    parser = argparse.ArgumentParser()
    build_and_run.add_parser(parser.add_subparsers())
    assert (
        build_and_run.main(parser.parse_args(["local", "run", "--gpus", "auto", "--", "ftenv", "report"]))
        == 0
    )
    run = next(c for c in calls() if c[1] == "run")
    assert run == [
        "docker",
        "run",
        "--rm",
        "--pull=never",
        *DOCKER_GPU,
        "localhost/ftenv:cu130",
        "ftenv",
        "report",
    ]
    assert "GPUs    passed: --gpus all --ipc=host" in capsys.readouterr().err


def test_the_build_script_starts_and_offers_the_machines_choices():
    """scripts/build_image.py (what `make image` runs) parses its arguments with machine's choices."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/build_image.py"), "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "{auto,docker,podman}" in r.stdout and "{auto,upstream,standin}" in r.stdout


# --- Docker without buildx, and too old a Docker ---------------------------------------------------


@pytest.mark.parametrize(
    "buildx, client, server, expected",
    [
        (True, "28.2.2", "28.2.2", "bake"),
        (True, "19.03.13", "19.03.13", "bake"),  # buildx brings its own BuildKit
        (False, "20.10.24+dfsg1", "20.10.24+dfsg1", "build"),  # Debian 12's docker.io
        (False, "20.10.5+dfsg1", "20.10.5+dfsg1", "build"),  # Debian 11's
        (False, None, None, "build"),  # versions unreadable: not held against it
        (False, "19.03.13", "19.03.13", "older than 20.10"),
        (False, "20.10.24", "18.09.1", "older than 20.10"),
        (False, "28.2.2", "20.10.24", "builds with BuildKit only through buildx"),
    ],
)
def test_the_docker_builder_for_each_docker(buildx, client, server, expected):
    if expected in ("bake", "build"):
        builder, line = build_and_run.docker_builder(buildx, client, server)
        assert builder == expected and line.startswith(
            f"builder docker {'buildx bake' if buildx else 'build'}"
        )
        return
    with pytest.raises(machine.Refusal, match=expected) as e:
        build_and_run.docker_builder(buildx, client, server)
    assert "buildx" in str(e.value) and "ENGINE=podman" in str(e.value)  # the fix is named


def _flags(cmd: list[str], flag: str) -> list[str]:
    """The values of `--flag=V` and `--flag V` (and `-t V`) in a command line."""
    out = [x.split("=", 1)[1] for x in cmd if x.startswith(f"{flag}=")]
    return out + [cmd[i + 1] for i, x in enumerate(cmd[:-1]) if x == flag]


@pytest.mark.parametrize("pull_ok", [False, True])
def test_docker_without_buildx_builds_the_bake_target_with_docker_build(
    fake_engines, monkeypatch, capsys, pull_ok
):
    """The same target as bake would get (args, labels, tags, Dockerfile, context), through one
    `docker build` with BuildKit; said in one line."""
    calls, log_path = fake_engines
    monkeypatch.setenv("DAEMON", "1")
    if pull_ok:
        monkeypatch.setenv("PULL_OK", "1")
    monkeypatch.setattr(build_and_run.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(build_and_run, "git_revision", lambda: "abc1234")
    monkeypatch.setenv("BUILDX", "1")
    assert build_and_run.build(V.default, ["ftenv-x:t"], []) == 0
    baked = json.loads(log_path.with_name("bake.json").read_text())["target"][V.default.name]
    log_path.unlink()
    monkeypatch.delenv("BUILDX")
    assert build_and_run.build(V.default, ["ftenv-x:t"], ["--progress=plain"]) == 0
    err = capsys.readouterr().err
    assert "builder docker build with BuildKit (DOCKER_BUILDKIT=1): no buildx plugin answers" in err
    log = calls()
    assert not any(c[1:3] == ["buildx", "bake"] for c in log)
    build = next(c for c in log if c[1] == "build")
    assert log_path.with_name("build.env").read_text() == "1"  # DOCKER_BUILDKIT=1
    assert build[-2:] == ["--progress=plain", baked["context"]]
    assert _flags(build, "-f") == [baked["dockerfile"]] and _flags(build, "-t") == baked["tags"]
    assert _flags(build, "--platform") == baked["platforms"] == ["linux/amd64"]
    assert ("--pull" in build) == baked["pull"] == pull_ok
    as_map = lambda values: dict(v.split("=", 1) for v in values)  # noqa: E731
    created = "org.opencontainers.image.created"
    args, labels = as_map(_flags(build, "--build-arg")), as_map(_flags(build, "--label"))
    assert {k: v for k, v in args.items() if k != "CREATED"} == {
        k: v for k, v in baked["args"].items() if k != "CREATED"
    }
    assert {k: v for k, v in labels.items() if k != created} == {
        k: v for k, v in baked["labels"].items() if k != created
    }
    assert args["BASE_IMAGE"] == (V.default.base_image if pull_ok else build_and_run.STANDIN_BASE)


def test_a_docker_that_cannot_build_stops_before_building(fake_engines, monkeypatch):
    calls, _ = fake_engines
    monkeypatch.setenv("DAEMON", "1")
    monkeypatch.setenv("DOCKER_SERVER", "19.03.13")
    with pytest.raises(machine.Refusal, match=r"older than 20\.10"):
        build_and_run.build(V.default, [], [])
    assert not any(c[1] in ("build", "import") or c[1:3] == ["buildx", "bake"] for c in calls())


def test_a_bake_attribute_without_a_docker_build_spelling_is_not_dropped():
    with pytest.raises(ValueError, match="no `docker build` spelling"):
        build_and_run.docker_build({"context": ".", "dockerfile": "d", "ssh": ["default"]}, [])


# --- the CA bundle of a TLS-intercepting proxy -------------------------------------------------------

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("engine, buildx", [("podman", False), ("docker", True), ("docker", False)])
def test_the_ca_bundle_is_one_build_secret_on_every_path(fake_engines, monkeypatch, tmp_path, engine, buildx):
    calls, log_path = fake_engines
    bundle = tmp_path / "ca.pem"
    bundle.write_text(PEM)
    if engine == "docker":
        monkeypatch.setenv("DAEMON", "1")
        monkeypatch.setattr(build_and_run.platform, "machine", lambda: "x86_64")
    if buildx:
        monkeypatch.setenv("BUILDX", "1")
    assert build_and_run.build(V.default, [], [], ca_bundle=build_and_run.checked_ca_bundle(str(bundle))) == 0
    secret = f"id={build_and_run.CA_SECRET_ID},src={bundle}"
    if buildx:
        target = json.loads(log_path.with_name("bake.json").read_text())["target"][V.default.name]
        assert target["secret"] == [secret]
    else:
        build = next(c for c in calls() if c[1] == "build")
        assert _flags(build, "--secret") == [secret]
        assert not any(str(bundle) in x for x in _flags(build, "--build-arg") + _flags(build, "--label"))


def test_without_a_ca_bundle_no_secret_is_passed(fake_engines):
    calls, _ = fake_engines
    assert build_and_run.build(V.default, [], []) == 0
    build = next(c for c in calls() if c[1] == "build")
    assert not any("secret" in x for x in build)


def test_a_ca_bundle_that_is_no_pem_file_is_refused(tmp_path):
    assert build_and_run.checked_ca_bundle(None) is None and build_and_run.checked_ca_bundle("") is None
    with pytest.raises(machine.Refusal, match="no such file"):
        build_and_run.checked_ca_bundle(str(tmp_path / "missing.pem"))
    (tmp_path / "key.txt").write_text("not a certificate\n")
    with pytest.raises(machine.Refusal, match="no PEM certificate"):
        build_and_run.checked_ca_bundle(str(tmp_path / "key.txt"))


def test_every_pip_step_that_downloads_mounts_the_ca_secret_and_only_there():
    """The Dockerfile's half of CA_BUNDLE: the secret (id CA_SECRET_ID) is mounted by each RUN that
    installs from an index, and pip is pointed at it only inside that RUN (no ENV, no COPY)."""
    import io

    from dockerfile_parse import DockerfileParser

    text = (ROOT / bake_file.DOCKERFILE).read_text()
    parsed = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    secret = build_and_run.CA_SECRET_ID
    mount = f"--mount=type=secret,id={secret},target=/run/secrets/{secret}"
    downloading = [
        i["value"] for i in parsed.structure if i["instruction"] == "RUN" and "--require-hashes" in i["value"]
    ]
    assert len(downloading) == 2  # the torch layer and the rest of the lock
    for run in downloading:
        assert mount in run
        assert f"export PIP_CERT=/run/secrets/{build_and_run.CA_SECRET_ID}" in run
    others = [i for i in parsed.structure if i["instruction"] != "RUN" or i["value"] not in downloading]
    assert not any("PIP_CERT" in i["value"] or build_and_run.CA_SECRET_ID in i["value"] for i in others)
    assert not text.startswith("# syntax=")  # no frontend pulled from a registry
