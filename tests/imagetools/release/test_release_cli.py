"""`python -m imagetools release ACTION`, run in-process through the real entry point: what each
action prints, writes and exits with, the usage errors of missing arguments, and the help.

The release workflow reads these outputs: `exists`'s exit code decides whether to rebuild, `bake` is
compared byte for byte with docker/docker-bake.json, `matrix` is the build matrix, `manifest` is
attached to the release. The registry is a stand-in `docker` on PATH; nothing is fetched.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ftenv.stack import versions
from imagetools import __main__ as imagetools_main
from imagetools import bake, tags
from imagetools.release import checks, command
from support import ROOT

V = versions.load(ROOT / "versions.toml")
SHA = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "sha256:" + "a" * 64
REF = "ghcr.io/o/i:t"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m imagetools release ARGS`; a usage error is exit 2."""
    try:
        code = imagetools_main.main(["release", *args])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


# --- tags, parse, matrix, bake ----------------------------------------------------------------------


def test_tags_of_a_build_are_the_commit_tag_and_of_a_release_the_stack_and_moving_ones(capsys):
    cu128 = V.variants["cu128"]
    repo = cu128.image["repository"]
    assert V.default.name != "cu128"  # a variant that does not get `latest`
    assert cli(capsys, "tags", "cu128", "--commit", SHA) == (
        0,
        f"{repo}:{tags.stack_tag(cu128)}-{SHA[:12]}\n",
        "",
    )
    code, out, _ = cli(capsys, "tags", "cu128", "--commit", SHA, "--release")
    assert code == 0
    assert out.split() == [
        f"{repo}:{t}" for t in (f"{tags.stack_tag(cu128)}-{SHA[:12]}", tags.stack_tag(cu128), "cu128")
    ]


def test_a_tag_parses_back_to_json(capsys):
    variant = V.default
    code, out, _ = cli(capsys, "parse", f"{tags.stack_tag(variant)}-{SHA[:12]}")
    assert code == 0
    parsed = json.loads(out)
    assert (parsed["kind"], parsed["variant"], parsed["commit"]) == ("commit", variant.name, SHA[:12])
    assert json.loads(cli(capsys, "parse", tags.LATEST)[1]) == {"kind": "moving", "variant": variant.name}


def test_matrix_has_one_row_per_variant_with_its_platforms_comma_separated(capsys):
    code, out, _ = cli(capsys, "matrix")
    assert code == 0
    rows = json.loads(out)
    assert [r["variant"] for r in rows] == list(V.variants)
    for row, variant in zip(rows, V.variants.values(), strict=True):
        assert row["image"] == variant.image["repository"]
        assert row["platforms"].split(",") == list(variant.platforms)
    assert any(len(v.platforms) > 1 for v in V.variants.values())  # the separator is exercised


def test_bake_prints_exactly_the_committed_file(capsys):
    """The release workflow runs `release bake | cmp - docker/docker-bake.json`: no byte more."""
    assert cli(capsys, "bake") == (0, (ROOT / bake.BAKE_FILE).read_text(), "")


def test_bake_write_writes_the_bake_file_of_the_checkout(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(command, "ROOT", tmp_path)
    (tmp_path / bake.BAKE_FILE).parent.mkdir(parents=True)
    assert cli(capsys, "bake", "--write") == (0, "", f"wrote {bake.BAKE_FILE}\n")
    assert (tmp_path / bake.BAKE_FILE).read_text() == bake.render_bake(V)


# --- manifest ---------------------------------------------------------------------------------------


def test_manifest_lists_labels_python_and_os_packages_sorted(capsys, tmp_path):
    (tmp_path / "pip.txt").write_text("torch==9.9.9\n\n  funasr==8.8.8  \n")
    (tmp_path / "dpkg.txt").write_text("tini\t0.19.0-1\tamd64\n\nbash\t5.2-1\tarm64\n")
    (tmp_path / "labels.json").write_text(json.dumps({"z.key": "last", "a.key": "first"}))
    args = ["--image", "img@" + DIGEST, "--platform", "linux/arm64"]
    files = ["--pip", str(tmp_path / "pip.txt"), "--dpkg", str(tmp_path / "dpkg.txt")]
    code, out, err = cli(capsys, "manifest", *args, *files, "--labels", str(tmp_path / "labels.json"))
    assert (code, err) == (0, "")
    assert out == (
        f"## `img@{DIGEST}` (linux/arm64)\n"
        "\n"
        "| label | value |\n"
        "|---|---|\n"
        "| `a.key` | `first` |\n"
        "| `z.key` | `last` |\n"
        "\n"
        "### Python packages (2, `pip freeze --all`)\n"
        "\n"
        "```\n"
        "funasr==8.8.8\n"
        "torch==9.9.9\n"
        "```\n"
        "\n"
        "### OS packages (2, `dpkg-query -W`)\n"
        "\n"
        "| package | version | arch |\n"
        "|---|---|---|\n"
        "| bash | 5.2-1 | arm64 |\n"
        "| tini | 0.19.0-1 | amd64 |\n"
        "\n"
    )
    # Without --labels the table has its header and no rows.
    code, out, _ = cli(capsys, "manifest", *args, *files)
    assert code == 0 and "|---|---|\n\n### Python packages (2," in out


@pytest.mark.parametrize("missing", ["--image", "--platform", "--pip", "--dpkg"])
def test_manifest_without_a_required_option_is_a_usage_error(capsys, tmp_path, missing):
    (tmp_path / "f").write_text("")
    given = {
        "--image": "img",
        "--platform": "linux/amd64",
        "--pip": str(tmp_path / "f"),
        "--dpkg": str(tmp_path / "f"),
    }
    del given[missing]
    code, out, err = cli(capsys, "manifest", *(x for kv in given.items() for x in kv))
    assert code == 2 and out == ""
    assert "the following arguments are required: " + missing in err


def test_tags_without_commit_or_an_action_is_a_usage_error(capsys):
    code, _, err = cli(capsys, "tags", "cu130")
    assert code == 2 and "the following arguments are required: --commit" in err
    code, _, err = cli(capsys)
    assert code == 2 and "the following arguments are required: action" in err


# --- exists: the registry query, through a stand-in `docker` ------------------------------------------

FAKE_DOCKER = """#!/bin/sh
echo "$*" >>"{log}"
printf '%s' '{stdout}'
printf '%s' '{stderr}' >&2
exit {rc}
"""


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """Make `docker` answer (stdout, stderr, rc); returns the file its arguments are logged to."""
    log = tmp_path / "docker.log"

    def answer(stdout: str = "", stderr: str = "", rc: int = 0) -> Path:
        fake = tmp_path / "docker"
        fake.write_text(FAKE_DOCKER.format(log=log, stdout=stdout, stderr=stderr, rc=rc))
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", str(tmp_path))
        return log

    return answer


def test_exists_prints_the_digest_and_exits_0(capsys, registry):
    log = registry(stdout=DIGEST + "\n")
    assert cli(capsys, "exists", REF) == (command.EXISTS, DIGEST + "\n", "")
    assert log.read_text() == f"buildx imagetools inspect {REF} --format {{{{.Manifest.Digest}}}}\n"


@pytest.mark.parametrize(
    "stderr",
    [
        f"ERROR: {REF}: not found",
        "ERROR: manifest unknown: manifest unknown",
        'ERROR: {"errors":[{"code":"MANIFEST_UNKNOWN"}]}',
    ],
)
def test_exists_exits_not_found_only_when_the_registry_says_so(capsys, registry, stderr):
    registry(stderr=stderr, rc=1)
    assert cli(capsys, "exists", REF) == (
        command.NOT_FOUND,
        "",
        f"release exists: {REF}: not found: {stderr}\n",
    )


@pytest.mark.parametrize(
    ("stdout", "stderr", "rc", "detail"),
    [
        ("", "ERROR: unexpected status from HEAD request: 401 Unauthorized", 1, "ERROR: unexpected status"),
        ("", "", 2, "inspect exited 2"),
        ("<no value>", "", 0, "unexpected inspect output: '<no value>'"),
        ("sha256:" + "A" * 64, "", 0, "unexpected inspect output"),
        # A long answer is cut to its first 200 characters in the message.
        ("x" * 300, "", 0, f"unexpected inspect output: {'x' * 200!r}\n"),
    ],
)
def test_exists_exits_query_failed_on_any_other_answer(capsys, registry, stdout, stderr, rc, detail):
    assert command.QUERY_FAILED not in (command.EXISTS, command.NOT_FOUND)
    registry(stdout=stdout, stderr=stderr, rc=rc)
    code, out, err = cli(capsys, "exists", REF)
    assert (code, out) == (command.QUERY_FAILED, "")
    assert err.startswith(f"release exists: {REF}: registry query failed (not a not-found): "), err
    assert detail in err


def test_exists_without_docker_is_a_query_failure_that_names_docker(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker here
    code, out, err = cli(capsys, "exists", REF)
    assert (code, out) == (command.QUERY_FAILED, "")
    assert "registry query failed (not a not-found): could not run docker: " in err


# --- check ------------------------------------------------------------------------------------------


def test_check_passes_on_the_checkout_by_default_and_names_every_sub_check(capsys):
    names = ", ".join(checks.SUBCHECKS)
    assert cli(capsys, "check") == (0, f"release-check: OK ({len(V.variants)} variants; {names})\n", "")


def test_check_of_another_root_prints_each_problem_and_exits_1(capsys, tmp_path):
    for rel in ("versions.toml", "docker", ".github", "README.md", "docs"):
        src = ROOT / rel
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / rel)
    assert cli(capsys, "--file", str(tmp_path / "versions.toml"), "check", "--root", str(tmp_path))[0] == 0
    (tmp_path / bake.BAKE_FILE).unlink()
    (tmp_path / "docker/Dockerfile").unlink()
    expected = checks.check(tmp_path, versions.load(tmp_path / "versions.toml"))
    assert len(expected) >= 2
    code, out, err = cli(capsys, "--file", str(tmp_path / "versions.toml"), "check", "--root", str(tmp_path))
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines == [f"release-check: {p}" for p in expected] + [
        f"release-check: FAILED, {len(expected)} problem(s)"
    ]
    assert any(line.startswith("release-check: bake: ") for line in lines)


def test_check_of_another_root_reads_its_versions_toml_unless_file_is_given(capsys, tmp_path):
    for rel in ("versions.toml", "docker", ".github", "README.md", "docs"):
        src = ROOT / rel
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / rel)
    funasr = V.default.python["funasr"]
    text = (tmp_path / "versions.toml").read_text()
    assert text.count(f'funasr = "{funasr}"') == 1
    (tmp_path / "versions.toml").write_text(
        text.replace(f'funasr = "{funasr}"', f'funasr = "{funasr}+local"')
    )
    code, _, err = cli(capsys, "check", "--root", str(tmp_path))
    assert code == 1 and re.search(r"^release-check: tags: .*valid", err, re.M), err
    code, _, err = cli(capsys, "--file", str(ROOT / "versions.toml"), "check", "--root", str(tmp_path))
    assert "release-check: tags: " not in err, err


# --- help ---------------------------------------------------------------------------------------

#: Each action's arguments, as the help spells them.
OPTIONS = {
    (): ["--file FILE"],
    ("tags",): ["variant", "--commit COMMIT", "--release"],
    ("parse",): ["tag"],
    ("matrix",): [],
    ("bake",): ["--write"],
    ("manifest",): ["--image IMAGE", "--platform PLATFORM", "--pip PIP", "--dpkg DPKG", "--labels LABELS"],
    ("exists",): ["ref"],
    ("check",): ["--root ROOT"],
}
ACTIONS = [a[0] for a in OPTIONS if a]


def _help(capsys, monkeypatch, *argv: str) -> str:
    """`python -m imagetools ARGV --help`, with one line per argument (no phrase wrapped)."""
    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = cli(capsys, *argv, "--help")
    assert code == 0
    return out


def _described(text: str, invocation: str) -> bool:
    """Does the help list `invocation` (an argument or an action) with a description?"""
    body = text.split("\n\n", 1)[1]  # past the usage lines
    return any(re.fullmatch(rf"\s+{re.escape(invocation)}\s{{2,}}\S.*", line) for line in body.splitlines())


def test_release_is_described_in_the_help_of_imagetools(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit) as e:
        imagetools_main.main(["--help"])
    text = capsys.readouterr().out
    assert e.value.code == 0 and _described(text, "release"), text
    # The page it points to exists (in this case: a wrong case would be a wrong file).
    docs = re.findall(r"docs/[\w.-]+\.md", text.split("\n    release ", 1)[1].splitlines()[0])
    assert docs and all((ROOT / d).is_file() for d in docs), docs


@pytest.mark.parametrize("action", list(OPTIONS), ids=lambda a: "-".join(a) or "release")
def test_every_action_and_argument_is_described_in_the_help(capsys, monkeypatch, action):
    text = _help(capsys, monkeypatch, *action)
    for name in OPTIONS[action] + ([] if action else ACTIONS):
        assert _described(text, name), f"{name} has no description in:\n{text}"
    if not action:  # the actions offered are exactly these
        assert "{" + ",".join(ACTIONS) + "}" in text


#: What each help must tell, as written (a wrong case is a wrong name, command or file).
HELP_FACTS = [
    ((), "versions file"),
    ((), "a build (or, with --release, a release)"),
    ((), "versions (JSON)"),
    ((), "build matrix (JSON)"),
    ((), "from pip freeze and dpkg output"),
    ((), "exit 1 when any finds a problem"),
    (("tags",), "versions.toml (`release matrix` lists them)"),
    (("tags",), f"git SHA (the first {tags.COMMIT_LEN} hex digits"),
    (("tags",), "stack and moving tags"),
    (("parse",), "without the `repository:` part"),
    (("bake",), f"write {bake.BAKE_FILE}"),
    (("manifest",), "manifest is of"),
    (("manifest",), "platform the packages were read on"),
    (("manifest",), "`pip freeze --all`"),
    (("manifest",), "labels as JSON"),
    (("exists",), "REPOSITORY:TAG or REPOSITORY@DIGEST"),
    (("check",), "the checkout to check, against its versions.toml unless --file is given"),
]


@pytest.mark.parametrize(("action", "fact"), HELP_FACTS, ids=lambda x: x if isinstance(x, str) else None)
def test_the_help_tells_what_each_argument_is(capsys, monkeypatch, action, fact):
    assert fact in _help(capsys, monkeypatch, *action)


def test_the_help_gives_the_manifest_scripts_dpkg_format_and_the_exit_codes_of_exists(capsys, monkeypatch):
    dpkg = re.search(r"`(dpkg-query [^`]*?)\.\.\.'`", _help(capsys, monkeypatch, "manifest"))
    assert dpkg and dpkg[1] in (ROOT / "scripts/release-manifest.sh").read_text()
    text = _help(capsys, monkeypatch)
    assert f"(exit {command.EXISTS}); exit {command.NOT_FOUND} only when the registry says not found" in text
    assert f"{command.QUERY_FAILED} on any other error" in text
