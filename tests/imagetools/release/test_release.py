"""The release pipeline, as far as it can be checked without GitHub (docs/releasing.md).

Each check of `python -m imagetools release check` (what `make release-check` runs) is shown to fail on
what it guards (a stale bake file, a bake tag or label that differs, a missing Dockerfile label, an unpinned
action) and to pass on the repository as it is. A changed version in a copy of versions.toml shows
the tags, labels and bake targets following it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ftenv.stack import versions
from imagetools import bake as bakefile
from imagetools import build_args as derived
from imagetools import tags
from imagetools.release import checks, command
from support import ROOT, child_env

V = versions.load(ROOT / "versions.toml")
#: versions.toml as plain TOML: the expected tags are spelled from it here, apart from the code under test.
PINS = tomllib.loads((ROOT / "versions.toml").read_text())
BAKE_TEXT = (ROOT / bakefile.BAKE_FILE).read_text()
DOCKERFILE_TEXT = (ROOT / bakefile.DOCKERFILE).read_text()
SHA = "0123456789abcdef0123456789abcdef01234567"
GOOD_PIN = "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1\n"


def cuda_suffix(cuda: str) -> str:
    """PyTorch's suffix for a CUDA version: '12.6.3' -> 'cu126'."""
    major, minor = cuda.split(".")[:2]
    return f"cu{major}{minor}"


def expected_stack_tag(funasr: str, table: dict) -> str:
    """`<stack>` as tags.py's docstring defines it, from a variant's versions.toml table (torch without
    its local `+cuNNN` tag)."""
    torch = table["torch"].split("+")[0]
    return f"funasr{funasr}-torch{torch}-{cuda_suffix(table['cuda'])}-cudnn{table['cudnn']}"


def next_patch(version: str) -> str:
    *head, last = version.split(".")
    return ".".join([*head, str(int(last) + 1)])


def set_pin(text: str, table: str, key: str, value: str) -> str:
    """versions.toml's text with `key` of `[table]` (and of no other table) set to `value`."""
    head, start, rest = text.partition(f"[{table}]\n")
    body, end, tail = rest.partition("\n[")
    body, n = re.subn(rf'(?m)^{key} = "[^"]*"$', f'{key} = "{value}"', body)
    assert start and n == 1, (table, key)
    return head + start + body + end + tail


def cli(*args: str, file: Path | None = None) -> str:
    """`python -m imagetools release ...` through its own parser, output captured."""
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    ns = parser.parse_args(["release", *(["--file", str(file)] if file else []), *args])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert ns.func(ns) == 0
    return buf.getvalue()


# --- the repository as it is passes ----------------------------------------------------------------


def test_release_check_passes_on_the_repository():
    assert checks.check(ROOT) == []


def test_committed_bake_file_is_the_generated_one_and_has_one_target_per_variant():
    data = json.loads(BAKE_TEXT)
    assert bakefile.render_bake(V) == BAKE_TEXT
    assert data["group"]["default"]["targets"] == list(V.variants)
    assert set(data["target"]) == {"_common", "_labels", *V.variants}
    for variant in V.variants.values():
        t = bakefile.resolve_target(data, variant.name, {"COMMIT": SHA[:12]})
        assert t["tags"] == [f"{variant.image['repository']}:{tags.stack_tag(variant)}-{SHA[:12]}"]
        assert t["platforms"] == list(variant.platforms)
        assert t["attest"] == ["type=provenance,mode=max", "type=sbom"]
        assert t["dockerfile"] == "docker/Dockerfile" and t["context"] == "."
        assert set(t["labels"]) == set(derived.labels(variant))
        assert t["cache-to"] == [
            f"type=registry,ref={bakefile.cache_ref(variant)},mode=max,ignore-error=true"
        ]


def test_arm64_only_where_the_wheels_were_checked():
    # docs/releasing.md: cu130's whole lock exists for aarch64 on PyPI; cu128's torch (PyTorch
    # index) could not be checked here.
    assert V.variants["cu130"].platforms == ["linux/amd64", "linux/arm64"]
    assert V.variants["cu128"].platforms == ["linux/amd64"]


# --- tags: scheme and round trip -------------------------------------------------------------------


def test_release_tags_of_the_default_and_another_variant():
    cu130, cu128 = V.variants["cu130"], V.variants["cu128"]
    stack = expected_stack_tag(PINS["python"]["funasr"], PINS["variants"]["cu130"])
    assert tags.release_tags(V, cu130, SHA) == [f"{stack}-0123456789ab", stack, "cu130", "latest"]
    assert tags.release_tags(V, cu128, SHA)[2:] == ["cu128"]  # no `latest`: not the default


@pytest.mark.parametrize("name", sorted(V.variants))
def test_every_tag_parses_back_into_its_versions(name):
    variant = V.variants[name]
    for tag in tags.release_tags(V, variant, SHA):
        got = tags.parse(tag, V)
        assert got["variant"] == name
        if got["kind"] != "moving":
            assert (got["funasr"], got["torch"], got["cuda_short"], got["cudnn"]) == (
                variant.python["funasr"],
                variant.torch_base,
                variant.cuda_short,
                variant.cudnn,
            )
    by_commit = tags.parse(f"{tags.stack_tag(variant)}-{SHA[:12]}", V)
    assert (by_commit["kind"], by_commit["commit"]) == ("commit", SHA[:12])
    assert tags.parse(tags.stack_tag(variant), V)["kind"] == "stack"


@pytest.mark.parametrize(
    "tag",
    [
        # a stack versions.toml does not have (cu130's but for its CUDA)
        expected_stack_tag(PINS["python"]["funasr"], PINS["variants"]["cu130"] | {"cuda": "12.6.3"}),
        expected_stack_tag(PINS["python"]["funasr"], PINS["variants"]["cu130"]) + "-XYZ",  # not a commit
        "edge",
        "",
    ],
)
def test_parse_rejects_tags_that_are_not_ours(tag):
    with pytest.raises(ValueError, match=re.escape(repr(tag))):  # the message names the tag
        tags.parse(tag, V)


def test_short_commit_wants_hex():
    assert tags.short_commit(SHA.upper()) == SHA[:12]
    for bad in ("abc", "main", "g0123456789"):
        with pytest.raises(ValueError, match=f"not a git commit SHA: '{bad}'"):
            tags.short_commit(bad)


def test_check_tags_fails_when_two_variants_share_a_tag(tmp_path):
    text = (ROOT / "versions.toml").read_text()
    twin = text.split("[variants.cu130]", 1)[1].split("[variants.", 1)[0]
    path = tmp_path / "versions.toml"
    path.write_text(text + "\n[variants.cu130b]" + twin)
    problems = checks.check_tags(versions.load(path))
    assert any("belongs to both cu130 and cu130b" in p for p in problems), problems
    assert checks.check_tags(V) == []


def test_check_tags_names_each_tag_that_is_invalid(tmp_path):
    funasr = V.default.python["funasr"]
    path = tmp_path / "versions.toml"
    path.write_text(
        (ROOT / "versions.toml").read_text().replace(f'funasr = "{funasr}"', f'funasr = "{funasr}+x"')
    )
    problems = []
    for name in V.variants:  # every variant carries the common funasr pin
        stack = tags.stack_tag(V.variants[name]).replace(funasr, f"{funasr}+x")
        problems += [
            f"{name}: '{stack}-0123456789ab' is not a valid image tag",
            f"{name}: not an immutable ftenv tag: '{stack}'",
            f"{name}: '{stack}' is not a valid image tag",
            f"{name}: not an immutable ftenv tag: '{stack}'",
        ]
    assert checks.check_tags(versions.load(path)) == problems


def test_check_bake_wants_the_default_group():
    data = json.loads(BAKE_TEXT)
    del data["group"]
    assert checks.check_bake(V, json.dumps(data))[1:] == [
        f"bake group default [] != variants {sorted(V.variants)}"
    ]


# --- a changed version follows through ---------------------------------------------------------------


def test_a_changed_version_moves_tags_labels_and_bake_targets(tmp_path):
    funasr = next_patch(PINS["python"]["funasr"])
    cudnn = next_patch(PINS["variants"]["cu130"]["cudnn"])
    assert cudnn != PINS["variants"]["cu128"]["cudnn"]  # so that cu128 shows it did not move
    text = set_pin((ROOT / "versions.toml").read_text(), "variants.cu130", "cudnn", cudnn)
    path = tmp_path / "versions.toml"
    path.write_text(set_pin(text, "python", "funasr", funasr))
    new = versions.load(path)
    cu130 = new.variants["cu130"]

    stack = expected_stack_tag(funasr, PINS["variants"]["cu130"] | {"cudnn": cudnn})
    assert tags.stack_tag(cu130) == stack
    assert cli("tags", "cu130", "--commit", SHA, "--release", file=path).split() == [
        f"ghcr.io/funasr-nano-images/funasr-nano:{t}"
        for t in (f"{stack}-{SHA[:12]}", stack, "cu130", "latest")
    ]
    assert tags.parse(stack, new)["cudnn"] == cudnn
    with pytest.raises(ValueError):  # the old stack is no longer one of ours
        tags.parse(tags.stack_tag(V.variants["cu130"]), new)

    labels = derived.labels(cu130)
    assert labels["ftenv.cudnn.version"] == cudnn
    assert labels["ftenv.funasr.version"] == funasr
    assert labels["org.opencontainers.image.version"] == stack

    bake = json.loads(cli("bake", file=path))
    t = bakefile.resolve_target(bake, "cu130", {"COMMIT": SHA[:12]})
    assert t["tags"] == [f"ghcr.io/funasr-nano-images/funasr-nano:{stack}-{SHA[:12]}"]
    assert t["args"]["CUDNN_VERSION"] == cudnn and t["args"]["FUNASR_VERSION"] == funasr
    assert t["labels"]["ftenv.cudnn.version"] == cudnn
    assert f"index,manifest:ftenv.cudnn.version={cudnn}" in t["annotations"]
    cu128 = bakefile.resolve_target(bake, "cu128", {"COMMIT": SHA[:12]})
    assert cu128["args"]["CUDNN_VERSION"] == PINS["variants"]["cu128"]["cudnn"]  # only cu130's cuDNN changed
    assert cu128["args"]["FUNASR_VERSION"] == funasr  # a common pin moves every variant

    # The committed bake file is now stale, and the check says so; the regenerated one passes.
    stale = checks.check_bake(new, BAKE_TEXT)
    assert any("make bake" in p for p in stale)
    assert any("bake target cu130: tags" in p for p in stale)
    assert checks.check_bake(new, bakefile.render_bake(new)) == []
    assert checks.check_tags(new) == []
    assert checks.check_labels(new, DOCKERFILE_TEXT) == []


def test_a_new_variant_gets_its_own_target_and_tags(tmp_path):
    text = (ROOT / "versions.toml").read_text()
    table = text.split("[variants.cu128]", 1)[1].split("\n[variants.", 1)[0]
    cu128 = PINS["variants"]["cu128"]
    local = "+" + cuda_suffix(cu128["cuda"])  # torch's local tag, +cu126 in the new variant
    path = tmp_path / "versions.toml"
    path.write_text(
        text + "\n[variants.cu126]" + table.replace(cu128["cuda"], "12.6.3").replace(local, "+cu126")
    )
    new = versions.load(path)
    bake = json.loads(bakefile.render_bake(new))
    assert bake["group"]["default"]["targets"] == [*V.variants, "cu126"]
    tags = bakefile.resolve_target(bake, "cu126", {"COMMIT": SHA[:12]})["tags"]
    stack = expected_stack_tag(PINS["python"]["funasr"], cu128 | {"cuda": "12.6.3"})
    assert tags == [f"ghcr.io/funasr-nano-images/funasr-nano:{stack}-{SHA[:12]}"]
    assert json.loads(cli("matrix", file=path))[-1] == {
        "variant": "cu126",
        "image": "ghcr.io/funasr-nano-images/funasr-nano",
        "platforms": "linux/amd64",
    }


def test_the_torch_2_15_variant_has_its_tag_bake_target_labels_and_matrix_row():
    cu132 = V.variants["cu132"]
    pins = PINS["variants"]["cu132"]
    stack = expected_stack_tag(PINS["python"]["funasr"], pins)
    assert stack.startswith(f"funasr{PINS['python']['funasr']}-torch{pins['torch']}-cu132-cudnn")
    assert tags.release_tags(V, cu132, SHA) == [f"{stack}-{SHA[:12]}", stack, "cu132"]  # not `latest`
    target = bakefile.resolve_target(json.loads(BAKE_TEXT), "cu132", {"COMMIT": SHA[:12]})
    assert (
        target["args"]["TORCH_VERSION"] == pins["torch"] and target["args"]["CUDNN_VERSION"] == pins["cudnn"]
    )
    assert target["args"]["BASE_IMAGE"] == pins["base_image"] and target["platforms"] == ["linux/amd64"]
    assert target["labels"]["ftenv.variant"] == "cu132"
    assert target["labels"]["org.opencontainers.image.version"] == stack
    assert target["tags"] == [f"{cu132.image['repository']}:{stack}-{SHA[:12]}"]
    assert {"variant": "cu132", "image": cu132.image["repository"], "platforms": "linux/amd64"} in json.loads(
        cli("matrix")
    )


# --- the bake check fails on what it guards --------------------------------------------------------


def _edited_bake(edit) -> str:
    data = json.loads(BAKE_TEXT)
    edit(data["target"])
    return json.dumps(data, indent=2) + "\n"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t["cu130"].update(tags=["ghcr.io/funasr-nano-images/funasr-nano:cu130"]), "cu130: tags"),
        (lambda t: t["cu128"]["labels"].pop("ftenv.cudnn.version"), "cu128: labels"),
        (lambda t: t["_labels"]["labels"].pop("org.opencontainers.image.source"), "cu130: labels"),
        (lambda t: t["cu130"]["args"].update(TORCH_VERSION="2.10.0"), "cu130: args"),
        (lambda t: t["cu130"].update(platforms=["linux/amd64"]), "cu130: platforms"),
        (lambda t: t["_common"].update(attest=["type=sbom"]), "cu128: attest"),
        (lambda t: t["cu130"]["annotations"].pop(), "cu130: annotations"),
        (lambda t: t["cu128"].update(inherits=["_common"]), "cu128: labels"),
        (lambda t: t["cu128"].update(tags=["x:${NOPE}"]), "undefined variable"),
    ],
)
def test_check_bake_fails_on_a_bake_file_that_differs(edit, expected):
    assert checks.check_bake(V, BAKE_TEXT) == []
    problems = checks.check_bake(V, _edited_bake(edit))
    assert any("make bake" in p for p in problems), problems
    assert any(expected in p for p in problems), problems


def test_check_bake_fails_on_a_file_that_is_not_json():
    assert "not JSON" in checks.check_bake(V, BAKE_TEXT[:-10])[0]


def test_resolve_target_merges_as_buildx_does():
    data = {
        "variable": {"X": {"default": "d"}},
        "target": {
            "a": {"args": {"A": "1", "B": "1"}, "annotations": ["a"], "tags": ["t:a"], "platforms": ["p1"]},
            "b": {"inherits": ["a"], "args": {"B": "2"}, "annotations": ["b"], "tags": ["t:${X}"]},
        },
    }
    t = bakefile.resolve_target(data, "b")
    assert t == {
        "args": {"A": "1", "B": "2"},  # maps merge, the child wins
        "annotations": ["a", "b"],  # annotations append
        "tags": ["t:d"],  # tags replace; ${X} takes its default
        "platforms": ["p1"],
    }
    assert bakefile.resolve_target(data, "b", {"X": "o"})["tags"] == ["t:o"]
    with pytest.raises(ValueError, match="not defined"):
        bakefile.resolve_target(data, "c")


def test_resolve_target_reads_a_minimal_bake_file():
    # No `variable` block, a variable without a default (buildx takes ""), no `target` block.
    plain = {"target": {"t": {"tags": ["t:a"]}}}
    assert bakefile.resolve_target(plain, "t") == {"tags": ["t:a"]}
    no_default = {"variable": {"V": {}}, "target": {"t": {"tags": ["t:a${V}b"]}}}
    assert bakefile.resolve_target(no_default, "t") == {"tags": ["t:ab"]}
    with pytest.raises(ValueError, match="bake target 't' is not defined"):
        bakefile.resolve_target({"variable": {}}, "t")
    looped = {"target": {"a": {"inherits": ["b"]}, "b": {"inherits": ["a"]}}}
    with pytest.raises(ValueError, match="bake target 'a' inherits itself"):
        bakefile.resolve_target(looped, "a")


# --- labels ----------------------------------------------------------------------------------------


def test_check_labels_fails_on_a_missing_or_different_dockerfile_label():
    assert checks.check_labels(V, DOCKERFILE_TEXT) == []
    missing = re.sub(r'\n\s*ftenv\.cudnn\.version="\$\{CUDNN_VERSION\}" \\', "", DOCKERFILE_TEXT)
    assert missing != DOCKERFILE_TEXT
    assert "docker/Dockerfile: label ftenv.cudnn.version missing" in checks.check_labels(V, missing)
    wrong = DOCKERFILE_TEXT.replace('ftenv.torch.version="${TORCH_VERSION}"', 'ftenv.torch.version="2.9.0"')
    assert wrong != DOCKERFILE_TEXT
    assert any("label ftenv.torch.version='2.9.0'" in p for p in checks.check_labels(V, wrong))
    extra = DOCKERFILE_TEXT.replace("LABEL ", 'LABEL ftenv.extra="x" \\\n      ', 1)
    problems = checks.check_labels(V, extra)
    assert "docker/Dockerfile: label ftenv.extra is not in build_args.labels()" in problems


# --- workflows: pins and actionlint ----------------------------------------------------------------


def _workflows(tmp_path: Path, *uses_lines: str) -> Path:
    d = tmp_path / "workflows"
    d.mkdir()
    body = "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n" + "".join(uses_lines)
    (d / "w.yml").write_text(body)
    return d


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("      - uses: actions/checkout@v4\n", "not pinned by a 40-hex commit SHA"),
        (
            "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1\n",
            "no `# vX.Y.Z` comment",
        ),
        ("      - uses: actions/checkout@3d3c42e5 # v7.0.1\n", "not pinned by a 40-hex commit SHA"),
        ("      - uses: docker://alpine:3.20\n", "not pinned by digest"),
        ("    uses: org/repo/.github/workflows/x.yml@main\n", "not pinned by a 40-hex commit SHA"),
    ],
)
def test_check_workflows_fails_on_an_unpinned_action(tmp_path, line, problem):
    problems = checks.check_workflows(_workflows(tmp_path, GOOD_PIN, line))
    assert len(problems) == 1 and problem in problems[0] and "w.yml:" in problems[0], problems


def test_check_workflows_accepts_pins_local_actions_and_the_repository(tmp_path):
    ok = checks.check_workflows(
        _workflows(
            tmp_path,
            GOOD_PIN,
            "      - uses: ./.github/actions/local\n",
            "      - uses: docker://alpine@sha256:" + "a" * 64 + "\n",
        )
    )
    assert ok == []
    real = sorted((ROOT / checks.WORKFLOWS).glob("*.yml"))
    assert {p.name for p in real} >= {"lint.yml", "test.yml", "release.yml"}
    assert checks.check_workflows(ROOT / checks.WORKFLOWS) == []
    uses = [line for p in real for line in p.read_text().splitlines() if "uses:" in line]
    assert len(uses) >= 10  # the check did see the actions


def test_check_workflows_fails_when_there_are_none(tmp_path):
    assert checks.check_workflows(tmp_path) == [f"{tmp_path}: no workflows"]


ACTIONLINT = Path(sys.executable).parent / "actionlint"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"


def _actionlint(root: Path = ROOT) -> subprocess.CompletedProcess:
    """actionlint as `make release-check` runs it, on the workflows under `root`."""
    assert ACTIONLINT.exists(), "actionlint is part of the test extra (pyproject.toml)"
    config = root / ".github/actionlint.yaml"
    files = sorted((root / checks.WORKFLOWS).glob("*.yml"))
    cmd = [str(ACTIONLINT), "-shellcheck", str(SHELLCHECK), "-config-file", str(config), *map(str, files)]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True)


def test_actionlint_passes_on_the_workflows():
    r = _actionlint()
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(
    ("old", "new", "finding"),
    [
        ("needs.plan.outputs.matrix", "needs.plan.outputs.matrx", "matrx"),  # an expression typo
        ('echo "digest=$digest"', "echo digest=$digest", "SC2086"),  # shellcheck in a run: script
        ("runs-on: [self-hosted, gpu]", "runs-on: [self-hosted, gpu2]", "gpu2"),  # an unknown runner label
    ],
)
def test_actionlint_fails_on_a_broken_workflow(tmp_path, old, new, finding):
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    path = tmp_path / ".github/workflows/release.yml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    r = _actionlint(tmp_path)
    assert r.returncode == 1 and finding in r.stdout, r.stdout + r.stderr


# --- the manifest and the GPU gate (their scripts, run against a stand-in `docker`) ---------------

FAKE_DOCKER = r"""#!/usr/bin/env bash
# A stand-in for `docker` that logs its arguments and answers what the release scripts ask.
echo "$*" >>"$FAKE_LOG"
case "$1" in
  pull|image) [ "$2" = inspect ] && echo '{"ftenv.variant":"cu130"}'; exit 0 ;;
  run)
    case "$*" in
      *"--entrypoint cat"*) printf 'torch==9.9.9\nfunasr==8.8.8\n' ;;
      *"--entrypoint dpkg-query"*) printf 'tini\t0.19.0-1\tamd64\nbash\t5.2-1\tamd64\n' ;;
      *selfcheck*)
        rc=${FAKE_DEFAULT_RC:-0}
        case "$*" in
          *SDPA_DEPRIORITIZED=1*) rc=${FAKE_VAR1_RC:-0} ;;
          *SDPA_DEPRIORITIZED=0*) rc=${FAKE_VAR0_RC:-1} ;;
        esac
        [ "$rc" = 0 ] && echo "PASS: step times are flat" || echo "FAIL: new shapes are slow"
        exit "$rc" ;;
    esac ;;
esac
"""


@pytest.fixture
def fake_docker(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    env = child_env(
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        FAKE_LOG=str(tmp_path / "docker.log"),
        SMOKE_OUT=str(tmp_path / "smoke"),
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
    )
    return env, tmp_path


def test_release_manifest_lists_labels_pip_and_os_packages(fake_docker):
    env, tmp = fake_docker
    image = "ghcr.io/x/y@sha256:" + "b" * 64
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # python3 with the package
    r = subprocess.run(
        [str(ROOT / "scripts/release-manifest.sh"), image, "linux/arm64"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert md.startswith(f"## `{image}` (linux/arm64)")
    assert "| `ftenv.variant` | `cu130` |" in md
    assert "### Python packages (2, `pip freeze --all`)" in md and "funasr==8.8.8\ntorch==9.9.9" in md
    assert "### OS packages (2, `dpkg-query -W`)" in md and "| bash | 5.2-1 | amd64 |\n| tini |" in md
    log = (tmp / "docker.log").read_text()
    assert f"pull --quiet --platform linux/arm64 {image}" in log
    assert "run --rm --platform linux/arm64 --entrypoint cat" in log


@pytest.mark.parametrize(
    ("rcs", "expected"),
    [
        ({}, 0),  # default and 1 PASS, 0 FAILs (the bug it fixes): the release goes on
        ({"FAKE_VAR0_RC": "0"}, 0),  # a GPU where cuDNN is never first: all PASS
        ({"FAKE_DEFAULT_RC": "1"}, 1),  # the default does not PASS: the release fails
        ({"FAKE_DEFAULT_RC": "3"}, 1),  # INCONCLUSIVE is not a PASS either
        ({"FAKE_VAR1_RC": "1"}, 1),
    ],
)
def test_gpu_smoke_fails_the_release_unless_the_default_passes(fake_docker, rcs, expected):
    env, tmp = fake_docker
    r = subprocess.run(
        [str(ROOT / "scripts/gpu-smoke.sh"), "img@sha256:" + "c" * 64],
        env=env | rcs,
        capture_output=True,
        text=True,
    )
    assert r.returncode == expected, r.stdout + r.stderr
    runs = [line for line in (tmp / "docker.log").read_text().splitlines() if line.startswith("run ")]
    assert len(runs) == 3 and all("--gpus all" in x and "ftenv selfcheck --device cuda" in x for x in runs)
    assert "-e TORCH_CUDNN_SDPA_DEPRIORITIZED" not in runs[0]  # the image's own default
    assert (
        "-e TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in runs[1] and "-e TORCH_CUDNN_SDPA_DEPRIORITIZED=0" in runs[2]
    )
    summary = (tmp / "summary.md").read_text()
    assert "| default |" in summary and "| var0 |" in summary
    assert {p.name for p in (tmp / "smoke").iterdir()} == {"default.log", "var1.log", "var0.log"}


def test_a_bake_difference_is_shown_per_key_and_per_item():
    by_key = "b: 2 != derived 3; c: '(missing)' != derived 4"
    assert checks._diff({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}) == by_key
    assert checks._diff({"a": 1}, {}) == "a: 1 != derived '(none)'"
    assert checks._diff(["x", "y"], ["y", "z"]) == "has ['x'], lacks derived ['z']"
    # only the order differs
    assert checks._diff(["x", "y"], ["y", "x"]) == "['x', 'y'] != derived ['y', 'x']"
    assert checks._diff(None, ["a"]) == "None != derived ['a']"
    assert checks._diff(None, {"a": 1}) == "None != derived {'a': 1}"  # an attribute missing
    assert checks._diff(["x"], ["x", "y"]) == "has [], lacks derived ['y']"


def test_check_workflows_reads_yaml_files_quoted_refs_and_line_numbers(tmp_path):
    sha = "3d3c42e5aac5ba805825da76410c181273ba90b1"
    (tmp_path / "w.yaml").write_text(
        "jobs:\n  a:\n    steps:\n"
        "      - uses: ./.github/actions/local\n"  # line 4: local, and the next line is still read
        f"      - uses: 'actions/checkout@{sha}' # v4.2.2\n"  # line 5: quoted, pinned
        "      - uses: actions/checkout@v4\n"  # line 6
    )
    assert checks.check_workflows(tmp_path) == [
        "w.yaml:6: actions/checkout@v4 is not pinned by a 40-hex commit SHA"
    ]
