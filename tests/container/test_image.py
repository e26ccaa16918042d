"""The built image: report, entrypoint pass-through, users, pip constraint, labels, build check."""

import json
import subprocess
import time
import uuid

import pytest

from ftenv.stack import versions
from imagetools import build_args as derived
from imagetools import tags
from imagetools.local import machine
from support import ROOT

V = versions.load(ROOT / "versions.toml")
ECHO_ARGS = ["python3", "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]


def test_report_without_gpu_exits_0_and_says_deprioritized(run):
    r = run("ftenv", "report")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("== ftenv report:") == 1  # the entrypoint does not print it twice
    assert "GPU     none visible" in r.stderr and "verdict NO GPU" in r.stderr
    assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=1: cuDNN attention is not moved to the front" in r.stderr
    cudnn = ".".join(V.default.cudnn.split(".")[:3])  # as torch reports it: major.minor.patch
    assert f"torch {V.default.torch_base}" in r.stderr and f"cuDNN {cudnn}" in r.stderr
    assert tags.image_ref(V.default) in r.stderr


def test_report_json_in_the_image(run):
    r = run("ftenv", "report", "--json")
    data = json.loads(r.stdout)
    assert data["facts"]["cudnn_version"] == V.default.cudnn_int
    assert data["facts"]["variant"] == V.default.name and data["env"]["state"] == "deprioritized"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0", "explicitly asks torch to prefer cuDNN attention"),
        ("true", "WARNING: TORCH_CUDNN_SDPA_DEPRIORITIZED='true': torch ignores 'true'"),
    ],
)
def test_overriding_the_variable_is_reported(run, value, expected):
    r = run("true", env={"TORCH_CUDNN_SDPA_DEPRIORITIZED": value})
    assert r.returncode == 0 and expected in r.stderr


def test_exit_code_is_the_commands(run):
    assert run("sh", "-c", "exit 7").returncode == 7


def test_arguments_arrive_verbatim_and_stdout_is_the_commands(run):
    args = ["a b", '"double"', "it's", "", "$HOME", "--", "-c", "*"]
    r = run(*ECHO_ARGS, *args)
    assert json.loads(r.stdout) == args
    assert r.stdout.count("\n") == 1  # the report went to stderr, not into the command's stdout


def test_report_can_be_skipped_and_a_failing_report_does_not_block(run):
    r = run("echo", "hi", env={"FTENV_REPORT": "0"})
    assert r.stdout == "hi\n" and "ftenv report" not in r.stderr
    broken = run(
        "echo",
        "still-runs",
        env={
            "FTENV_VERSIONS_FILE": "/x",
            "PYTHONPATH": "/nonexistent",
            "FTENV_REPORT_TIMEOUT": "not-a-number",
        },
    )
    assert broken.returncode == 0 and broken.stdout == "still-runs\n"
    assert "the start-up report failed" in broken.stderr


def test_sigterm_reaches_the_command(image):
    name = f"ftenv-sig-{uuid.uuid4().hex[:8]}"
    script = 'trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.1; done'
    subprocess.run(
        ["podman", "run", "-d", "--name", name, image, "sh", "-c", script], check=True, capture_output=True
    )
    try:
        for _ in range(120):
            if "ready" in subprocess.run(["podman", "logs", name], capture_output=True, text=True).stdout:
                break
            time.sleep(0.5)
        subprocess.run(["podman", "kill", "--signal", "TERM", name], check=True, capture_output=True)
        code = subprocess.run(["podman", "wait", name], capture_output=True, text=True, timeout=60).stdout
        logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)
    assert code.strip() == "42" and "got-term" in logs


def test_non_root_by_default_with_writable_caches(run):
    r = run("sh", "-c", 'id -u; id -g; touch "$HF_HOME/.w" "$TORCH_HOME/.w" /workspace/.w && echo writable')
    assert r.stdout.split() == ["1000", "0", "writable"], r.stderr


@pytest.mark.parametrize("user", ["12345:0", "0:0"])
def test_arbitrary_uid_with_group_0_and_root_work(run, user):
    r = run("sh", "-c", 'touch "$HOME/.cache/x" && python3 -c "import torch, funasr" && echo ok', user=user)
    assert r.returncode == 0 and r.stdout.endswith("ok\n"), r.stderr[-2000:]
    assert "verdict NO GPU" in r.stderr


@pytest.mark.parametrize(
    "user", [None, "12345:12345", "0:0"], ids=["default-user", "another-uid-gid", "root"]
)
def test_login_shells_find_the_venv(run, user):
    """enroot runs commands through a login shell (ENROOT_LOGIN_SHELL, on by default), which sources
    /etc/profile: Debian's resets PATH. The venv's ftenv and python3 must still come first."""
    r = run("bash", "--login", "-c", "command -v ftenv python3", user=user, env={"FTENV_REPORT": "0"})
    assert r.stdout.split() == ["/opt/venv/bin/ftenv", "/opt/venv/bin/python3"], r.stdout + r.stderr


def test_pip_cannot_replace_the_pinned_torch(run):
    refused = run("pip", "install", "--dry-run", "--no-deps", "torch==2.10.0", env={"FTENV_REPORT": "0"})
    assert refused.returncode != 0
    assert "constraint" in refused.stdout + refused.stderr
    # Control: the same request without the constraint would go through.
    allowed = run(
        "pip",
        "install",
        "--dry-run",
        "--no-deps",
        "torch==2.10.0",
        env={"FTENV_REPORT": "0", "PIP_CONSTRAINT": ""},
    )
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert "Would install torch-2.10.0" in allowed.stdout


def test_labels_are_the_derived_ones(image):
    out = subprocess.run(["podman", "image", "inspect", image], capture_output=True, text=True, check=True)
    labels = json.loads(out.stdout)[0]["Labels"]
    expected = derived.labels(V.default)
    for key in ("org.opencontainers.image.revision", "org.opencontainers.image.created"):
        assert labels[key] not in ("", "unknown")
        expected.pop(key)
    assert {k: labels.get(k) for k in expected} == expected


def _inspect(name: str) -> dict | None:
    out = subprocess.run(["podman", "image", "inspect", name], capture_output=True, text=True)
    return json.loads(out.stdout)[0] if out.returncode == 0 else None


def test_the_base_is_the_standin_and_says_so_or_the_real_one(image, run):
    """Built where the registry cannot be reached (CI, these machines): FROM the stand-in, labelled,
    and the report says it; built where it can: FROM the real base, unmarked."""
    info, report = _inspect(image), run("true").stderr
    standin = (info["Labels"] or {}).get(machine.STANDIN_LABEL)
    base = _inspect(machine.STANDIN_BASE if standin else V.default.base_image)
    assert base is not None
    assert info["RootFS"]["Layers"][0] == base["RootFS"]["Layers"][0]  # really built FROM that base
    line = f"base    built on a stand-in base ({machine.STANDIN_BASE}): for tests, not for training"
    if standin:
        assert standin == machine.STANDIN_BASE and line in report
    else:  # NVIDIA's image, not a stand-in under its name
        assert not machine.shadowing_standin("podman", V.default.base_image)
        assert "stand-in" not in report


def test_nothing_built_here_is_named_for_a_registry(image):
    """The image and the stand-in live under localhost/ only: neither can shadow a registry's image."""
    for name in (image, machine.STANDIN_BASE):
        info = _inspect(name)
        if info is not None:
            assert info["RepoTags"] and all(t.startswith("localhost/") for t in info["RepoTags"]), name


def test_build_check_fails_the_build_on_a_wrong_pin(image):
    """Rebuild with one expected version wrong: the heavy layers come from cache, the check fails."""
    r = subprocess.run(
        [
            "flock",
            "/tmp/ftenv-build.lock",
            "python3",
            str(ROOT / "scripts/build_image.py"),
            V.default.name,
            "--tag",
            "ftenv-wrong-pin:test",
            "--",
            "--build-arg=FUNASR_VERSION=0.0.1",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    subprocess.run(["podman", "rmi", "-f", "ftenv-wrong-pin:test"], capture_output=True)
    assert r.returncode != 0
    installed = V.default.python["funasr"]
    assert f"MISMATCH funasr: installed {installed}, versions.toml says 0.0.1" in r.stdout + r.stderr
