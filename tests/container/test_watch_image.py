"""`ftenv watch` and `ftenv analyze` inside the built image: through its entrypoint with tini as
PID 1, the image's own TORCH_CUDNN_SDPA_DEPRIORITIZED=1, an override to 0, exit codes and SIGTERM
from the engine (`podman kill`). The command is tests/support/fake_trainer.py (mounted read-only): the
pattern of FunASR issue #3704 in the trainer's real line format. No GPU: the arch is unknown here."""

from __future__ import annotations

import re
import subprocess
import time
import uuid

from conftest import ROOT
from ftenv.stack import versions
from ftenv.watchdog import crash

V = versions.load(ROOT / "versions.toml")
MOUNT = ["-v", f"{ROOT / 'tests/support'}:/t:ro"]
FAKE = ["python3", "/t/fake_trainer.py"]
QUIET = {"FTENV_REPORT": "0"}


def test_image_default_names_another_cause(run):
    r = run("ftenv", "watch", "--", *FAKE, "--steps", "60", env=QUIET, extra=MOUNT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if "SLOW STEP" in line)
    full = f"{lines[i]} {lines[i + 1]}"  # the short line and the explanation under it
    # The image sets the variable to 1: cuDNN is not first, so the hint must not blame it.
    assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=1, cuDNN attention first: no" in full
    assert "not first here (TORCH_CUDNN_SDPA_DEPRIORITIZED=1 is set)" in full
    assert "Fix: set TORCH" not in full


def test_override_to_0_gets_the_cause_and_the_fix(run):
    env = {**QUIET, "TORCH_CUDNN_SDPA_DEPRIORITIZED": "0"}
    r = run("ftenv", "watch", "--", *FAKE, "--exit", "1", env=env, extra=MOUNT)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if "SLOW STEP" in line)
    step = re.search(r" step (\d+):", lines[i]).group(1)
    assert f"total step: {step}," in lines[i - 1]
    assert "fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in lines[i]
    detail = lines[i + 1]  # the explanation under the short line
    assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=0" in detail and f"torch {V.default.torch_base}" in detail
    assert "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in detail
    assert "this image sets it to 1: something overrode it" in detail
    # The command exited 1: the closing block says so first, and labels the step-time verdict.
    assert "[ftenv-watch] the training command FAILED (exit code 1)" in r.stdout
    assert f"[ftenv-watch] {crash.VERDICT_LABEL}: FAIL" in r.stdout


def test_analyze_in_the_image(run):
    r = run(
        "sh",
        "-c",
        "python3 /t/fake_trainer.py > /tmp/train.log 2>/dev/null && ftenv analyze /tmp/train.log",
        env=QUIET,
        extra=MOUNT,
    )
    assert r.returncode == 1, r.stderr  # FAIL's exit code (docs/watchdog.md)
    # FunASR issue #3704's 59 slow steps of 382, the first step set apart as the run's start-up.
    assert "58 of 381, 58 on shapes new to their rank (100%)" in r.stdout and "verdict: FAIL" in r.stdout


def test_sigterm_from_the_engine_reaches_the_command(image):
    name = f"ftenv-watch-{uuid.uuid4().hex[:8]}"
    script = (
        "import signal, sys, time\n"
        "def bye(s, f):\n"
        "    print('command got SIGTERM', flush=True); sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('READY', flush=True)\n"
        "time.sleep(300)\n"
    )
    start = ["podman", "run", "-d", "--pull=never", "--name", name, "-e", "FTENV_REPORT=0", image]
    subprocess.run([*start, "ftenv", "watch", "--", "python3", "-c", script], check=True, capture_output=True)
    try:
        for _ in range(120):
            logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True).stdout
            if "READY" in logs:
                break
            time.sleep(0.5)
        subprocess.run(["podman", "kill", "--signal", "TERM", name], check=True, capture_output=True)
        code = subprocess.run(["podman", "wait", name], capture_output=True, text=True, timeout=120).stdout
        logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True).stdout
        assert "command got SIGTERM" in logs
        assert code.strip() == "143"
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)
