"""`python -m imagetools release check` (what `make release-check` runs): every sub-check runs, and
the command exits 1 on each kind of problem.

Each test copies the parts of the checkout the check reads into a temporary folder, injects one
fault and runs the real command line in a subprocess: a CLI that returned 0 on problems, a check()
that dropped a sub-check, or a sub-check that passed on a missing file would fail here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ftenv.stack import versions
from imagetools.release import checks, command, workflow_rules
from support import ROOT, child_env

COPIED = ("versions.toml", "docker", ".github", "README.md", "docs")


@pytest.fixture
def repo(tmp_path):
    for rel in COPIED:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, tmp_path / rel)
        else:
            shutil.copy2(src, tmp_path / rel)
    return tmp_path


def release_check(root: Path) -> subprocess.CompletedProcess:
    env = child_env()
    cmd = [sys.executable, "-m", "imagetools", "release", "--file", str(root / "versions.toml")]
    return subprocess.run([*cmd, "check", "--root", str(root)], capture_output=True, text=True, env=env)


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, count))


def _unpin(root: Path) -> None:
    edit(root / ".github/workflows/release.yml", "@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1", "@v7")


def _swap_lock_layers(root: Path) -> None:
    df = root / "docker/Dockerfile"
    edit(df, "-r /opt/ftenv/locks/torch.txt", "-r /opt/ftenv/locks/TMP.txt")
    edit(df, "-r /opt/ftenv/locks/rest.txt", "-r /opt/ftenv/locks/torch.txt")
    edit(df, "-r /opt/ftenv/locks/TMP.txt", "-r /opt/ftenv/locks/rest.txt")


V = versions.load()
FUNASR, TORCH = V.default.python["funasr"], V.default.torch

#: One fault per sub-check: (sub-check name, how to inject it, a phrase of the expected problem).
FAULTS = {
    "tags": (
        lambda r: edit(r / "versions.toml", f'funasr = "{FUNASR}"', f'funasr = "{FUNASR}+local"'),
        "valid",
    ),
    "bake": (lambda r: (r / "docker/docker-bake.json").unlink(), "docker-bake.json missing"),
    "labels": (
        lambda r: edit(r / "docker/Dockerfile", '      ftenv.funasr.version="${FUNASR_VERSION}"', ""),
        "label ftenv.funasr.version missing",
    ),
    "layers": (_swap_lock_layers, "lock layers installed as ['rest', 'torch']"),
    "locks": (
        lambda r: edit(r / "docker/locks/layers/cu130-torch.txt", f"torch=={TORCH}", f"torch=={TORCH}.post9"),
        "cu130-torch.txt is not what cu130.txt derives",
    ),
    "pins": (_unpin, "not pinned by a 40-hex commit SHA"),
    "workflow": (
        lambda r: edit(
            r / ".github/workflows/release.yml",
            ">-\n      !cancelled() && startsWith",  # promote's condition
            ">-\n      always() && startsWith",
        ),
        "must use `!cancelled()`",
    ),
    "generated": (
        lambda r: (r / "docs/finetune.md").write_text(
            (r / "docs/finetune.md").read_text() + f"\nThe image pins funasr {FUNASR}.\n"
        ),
        "is spelled by hand",
    ),
}


def test_every_sub_check_has_a_fault_here():
    assert set(FAULTS) == set(checks.SUBCHECKS)


def test_release_check_passes_on_the_checkout_and_names_every_sub_check(repo):
    r = release_check(repo)
    assert r.returncode == 0, r.stderr
    assert all(name in r.stdout for name in checks.SUBCHECKS), r.stdout


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_release_check_exits_1_on_each_kind_of_problem(repo, name):
    inject, phrase = FAULTS[name]
    inject(repo)
    r = release_check(repo)
    assert r.returncode == 1, f"exit {r.returncode} with a {name} problem:\n{r.stderr}"
    assert re.search(rf"release-check: {name}: .*{re.escape(phrase)}", r.stderr), r.stderr


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_check_runs_every_sub_check(repo, name):
    """check() itself (not only the CLI) reports each sub-check's problem under that sub-check's name."""
    FAULTS[name][0](repo)
    problems = checks.check(repo, versions.load(repo / "versions.toml"))
    assert any(p.startswith(f"{name}: ") for p in problems), problems


def test_missing_files_are_problems_not_passes(repo):
    for rel in ("docker/docker-bake.json", "docker/Dockerfile", "docker/locks/layers/cu130-rest.txt"):
        (repo / rel).unlink()
    shutil.rmtree(repo / ".github/workflows")
    problems = checks.check(repo, versions.load(repo / "versions.toml"))
    for phrase in (
        "bake: docker/docker-bake.json missing",
        "labels: docker/Dockerfile missing",
        "layers: docker/Dockerfile missing",
        "cu130-rest.txt is not what",
        "pins:",
        "workflow:",
    ):
        assert any(phrase in p for p in problems), (phrase, problems)
    assert release_check(repo).returncode == 1


# --- the layer order in the Dockerfile ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "phrase"),
    [
        # a volatile ARG declared before the torch layer would rebuild it on every FunASR bump
        ("ARG VARIANT\n", "ARG VARIANT\nARG FUNASR_VERSION\n", "ARG FUNASR_VERSION is declared before"),
        # the rest of the lock copied before the torch layer: its change invalidates the torch RUN
        (
            "COPY docker/locks/layers/${VARIANT}-torch.txt",
            "COPY docker/locks/layers/${VARIANT}-rest.txt /opt/ftenv/locks/rest.txt\n"
            "COPY docker/locks/layers/${VARIANT}-torch.txt",
            "comes before the torch layer",
        ),
        # the whole lock in one layer
        ("-r /opt/ftenv/locks/rest.txt", "-r /opt/ftenv/lock.txt", "expected ['torch', 'rest']"),
        # an ARG with a default is read by its name
        ("ARG VARIANT\n", "ARG VARIANT\nARG REVISION=dev\n", "ARG REVISION is declared before"),
        # ADD like COPY; versions.toml or our sources before the torch layer
        (
            "ARG VARIANT\n",
            "ARG VARIANT\nADD versions.toml /v.toml\n",
            "`ADD versions.toml /v.toml` comes before",
        ),
        ("ARG VARIANT\n", "ARG VARIANT\nCOPY scripts/x /x\n", "`COPY scripts/x /x` comes before"),
        # ftenv copied between the two lock layers, or not at all
        (
            "COPY docker/locks/layers/${VARIANT}-rest.txt",
            "COPY scripts/ftenv /x\nCOPY docker/locks/layers/${VARIANT}-rest.txt",
            "ftenv must be copied after the lock layers",
        ),
        (
            "COPY scripts/ftenv /tmp/ftenv-src/scripts/ftenv\n",
            "",
            "ftenv must be copied after the lock layers",
        ),
    ],
)
def test_layer_order_check_fails_on_a_broken_order(old, new, phrase):
    text = (ROOT / "docker/Dockerfile").read_text()
    assert old in text
    problems = checks.check_layer_order(text.replace(old, new, 1))
    assert any(phrase in p for p in problems), problems


# --- the release workflow's rules ----------------------------------------------------------------------

WF = ROOT / ".github/workflows/release.yml"


@pytest.mark.parametrize(
    ("old", "new", "phrase"),
    [
        (
            "!cancelled() && startsWith(github.ref, 'refs/tags/v') && needs.build",
            "always() && startsWith(github.ref, 'refs/tags/v') && needs.build",
            "`!cancelled()`",
        ),
        (
            "(needs.gpu-smoke.result == 'skipped' && needs.approve-without-gpu.result == 'success')",
            "needs.gpu-smoke.result == 'skipped'",
            "without a recorded decision",
        ),
        ("    environment: release-without-gpu\n", "", "without a recorded decision"),
        ("      && needs.scan.result == 'success'\n", "", "the `scan` job"),
        (
            'digest=$(python3 -m imagetools release exists "$ref") || rc=$?',
            'digest=$(docker buildx imagetools inspect "$ref" 2>/dev/null) || rc=$?',
            "hides registry errors",
        ),
        ("git merge-base --is-ancestor", "git merge-base", "on main"),
        ("/usr/local/.ghcup", "/tmp/x", "/usr/local/.ghcup"),
        (" /usr/share/swift", "", "/usr/share/swift"),
        ("          image: ${{ env.BINFMT_IMAGE }}\n", "", "binfmt"),
        ("@sha256:28a898719c18a33f4e8000685287fa36fd0dd9560c6440227d3a732d79bb41d8", "", "BuildKit image"),
        ("COSIGN_RELEASE: v3.0.6", "COSIGN_RELEASE: v2.5.0", "cosign-release"),
        (
            "          severity-cutoff: critical\n          only-fixed: true\n"
            "          output-format: table\n      - name: Gate on the lock SBOM",
            "          severity-cutoff: high\n          only-fixed: true\n"
            "          output-format: table\n      - name: Gate on the lock SBOM",
            "image SBOM",
        ),
        (
            "          sbom: ${{ runner.temp }}/scan/lock-",
            "          path: ${{ runner.temp }}/scan/lock-",
            "lock SBOM",
        ),
        ('smoke="GPU smoke:', 'smoke="Smoke:', "GPU smoke:"),
        ('echo "linux/arm64 images are built', 'echo "images are built', "arm64"),
    ],
)
def test_release_workflow_rule_fails_on_its_finding(old, new, phrase):
    import yaml

    text = WF.read_text()
    assert old in text, old
    wf = yaml.safe_load(text.replace(old, new))
    wf["on"] = wf.pop(True)
    problems = workflow_rules.rules_release(wf)
    assert any(phrase in p for p in problems), problems


def test_a_self_hosted_runner_in_a_pull_request_workflow_is_a_problem(repo):
    path = repo / ".github/workflows/release.yml"
    edit(path, "on:\n  push:", "on:\n  pull_request:\n  push:")
    problems = workflow_rules.check(repo / ".github/workflows")
    assert any("job gpu-smoke runs on a self-hosted runner" in p for p in problems), problems


# --- `release exists`: rebuild only on a real not-found ------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "stderr", "rc", "expected"),
    [
        ("sha256:" + "a" * 64, "", 0, command.EXISTS),
        ("<no value>", "", 0, command.QUERY_FAILED),
        ("", "ERROR: ghcr.io/o/i:t: not found", 1, command.NOT_FOUND),
        ("", "ERROR: unexpected status from HEAD request: 401 Unauthorized", 1, command.QUERY_FAILED),
        ("", "ERROR: failed to do request: dial tcp: lookup ghcr.io: no such host", 1, command.QUERY_FAILED),
        ("", "", 1, command.QUERY_FAILED),
    ],
)
def test_exists_query_rebuilds_only_on_not_found(tmp_path, stdout, stderr, rc, expected):
    fake = tmp_path / "inspect"
    fake.write_text(f"#!/bin/sh\nprintf '%s' '{stdout}'\nprintf '%s' '{stderr}' >&2\nexit {rc}\n")
    fake.chmod(0o755)
    code, detail = command.query_registry("ghcr.io/o/i:t", inspect=[str(fake)])
    assert code == expected, detail
    if code == command.EXISTS:
        assert detail == "sha256:" + "a" * 64


# --- the workflow rules on small workflows: each message, and what a rule must not misread ---------------

SCAN_GATES = [
    f"no gating scan of the {what} SBOM (anchore/scan-action with sbom, fail-build: true, "
    "severity-cutoff: critical, only-fixed: true)"
    for what in ("image", "lock")
]


def test_release_rules_on_a_workflow_that_has_none_of_what_they_want():
    assert workflow_rules.rules_release({}) == ["no `promote` job"]
    assert workflow_rules.rules_release({"jobs": {"promote": {}}}) == [
        "promote: its `if` must use `!cancelled()`, not `always()`",
        "promote: must require `needs.gpu-smoke.result == 'success'`",
        "promote: must need and require the `scan` job",
        "no step checks that a release tag's commit is on main (merge-base --is-ancestor)",
        "build: disk cleanup misses /usr/share/dotnet, /usr/local/lib/android, /opt/ghc, /usr/local/.ghcup, "
        "/usr/share/swift, /opt/hostedtoolcache",
        *SCAN_GATES,
        "github-release: the notes do not say `GPU smoke:`",
        "github-release: the notes do not say `arm64`",
    ]


def test_release_rules_read_needs_as_a_string_and_a_plain_condition():
    cond = "!cancelled() && needs.gpu-smoke.result == 'success' && needs.scan.result == 'success'"
    problems = workflow_rules.rules_release({"jobs": {"promote": {"if": cond, "needs": "scan"}}})
    assert not [p for p in problems if p.startswith("promote:")], problems


def test_release_rules_on_a_workflow_with_each_finding():
    cond = (
        "always() && !cancelled() && (needs.gpu-smoke.result == 'success' || (needs.gpu-smoke.result == "
        "'skipped' && needs.ghost.result == 'success')) && needs.scan.result == 'success'"
    )
    disk = " ".join(f"{p}/" for p in workflow_rules.DISK_HOGS)  # a trailing slash still counts
    query = 'x=$(docker buildx imagetools inspect "$ref" 2> /dev/null)\ncurl x 2>/dev/null'
    wf = {
        "jobs": {
            # gpu-smoke has an environment, but it is the job being skipped: it decides nothing
            "promote": {"if": cond, "needs": ["scan", "gpu-smoke"]},
            "gpu-smoke": {"environment": "gpu", "steps": ["not a step"]},
            "build": {
                "steps": [
                    {"run": f"rm -rf {disk}"},
                    {"run": f"{query}\ngit merge-base --is-ancestor a b"},
                    {"uses": "sigstore/cosign-installer@abc", "with": {"cosign-release": "${{ env.C }}"}},
                    {"uses": "docker/setup-qemu-action@abc", "with": {"image": "${{ env.NOPE }}"}},
                    {"uses": "docker/setup-buildx-action@abc"},
                ]
            },
            "github-release": {"steps": [{"run": "echo GPU smoke: yes"}, {"run": "echo linux/arm64"}]},
        }
    }
    assert workflow_rules.rules_release(wf) == [
        "promote: its `if` must use `!cancelled()`, not `always()`",
        "promote: accepts a skipped GPU smoke test without a recorded decision "
        "(a job with a protected `environment:` that promote needs and requires)",
        "build: `imagetools inspect ... 2>/dev/null` hides registry errors",  # the spaced `2> /dev/null`
        "build: cosign-installer needs `cosign-release: v3.x` or newer",
        "build: setup-qemu-action's binfmt `image` is not pinned by digest",
        "build: setup-buildx-action's BuildKit image is not pinned by digest",
        *SCAN_GATES,
    ]


def test_self_hosted_rule_reads_every_form_of_on():
    rule = workflow_rules.rule_no_self_hosted_for_prs
    jobs = {"j": {"runs-on": "self-hosted"}, "k": {}}
    assert rule("x.yml", {}) == [] and rule("x.yml", {"on": "pull_request"}) == []
    for on in ("pull_request", "pull_request_target", ["pull_request_target"], {"pull_request": None}):
        assert rule("x.yml", {"on": on, "jobs": jobs}) == [
            "x.yml: job j runs on a self-hosted runner in a workflow that pull requests trigger"
        ]
    assert rule("x.yml", {"on": "push", "jobs": jobs}) == []


def test_workflow_check_reads_every_file_and_reports_unreadable_ones(tmp_path):
    shutil.copy(WF, tmp_path / "release.yml")
    (tmp_path / "a-list.yml").write_text("- just\n- a list\n")
    (tmp_path / "b-broken.yml").write_text("on: [push\n")
    pr_workflow = '"on": pull_request_target\njobs:\n  j:\n    runs-on: [self-hosted]\n'
    (tmp_path / "c-pr.yaml").write_text(pr_workflow)
    (tmp_path / "d-no-on.yml").write_text("jobs:\n  j:\n    runs-on: self-hosted\n")
    problems = workflow_rules.check(tmp_path)
    assert problems[0] == "a-list.yml: not a workflow"
    assert problems[1].startswith("b-broken.yml: not YAML: while parsing a flow sequence")
    assert problems[2:] == [
        "c-pr.yaml: job j runs on a self-hosted runner in a workflow that pull requests trigger"
    ]
    (tmp_path / "release.yml").unlink()
    assert workflow_rules.check(tmp_path) == [f"{tmp_path / 'release.yml'} missing"]


def test_release_rules_pass_on_the_workflow_as_committed():
    import yaml

    wf = yaml.safe_load(WF.read_text())
    wf["on"] = wf.pop(True)
    assert workflow_rules.rules_release(wf) == []


def test_check_reads_the_versions_file_of_the_root_it_checks(repo):
    edit(repo / "versions.toml", f'funasr = "{FUNASR}"', f'funasr = "{FUNASR}+local"')
    assert any(p.startswith("tags: ") for p in checks.check(repo)), "check() read another versions.toml"
