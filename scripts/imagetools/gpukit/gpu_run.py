"""The GPU kit's runner parts (scripts/gpu_checks.py): each command under its own time budget,
logged, and the context the steps share. Standard library and ftenv's pure modules only: the kit
starts on a bare python3."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.attention import sdpa
from ftenv.stack import versions
from imagetools import ROOT, locks

SCRIPTS = ROOT / "scripts"

#: The whole run, the install included, must end within this (the GPU machine allows 10 minutes
#: a command and 15 minutes a session, start-up included: 8 minutes leaves room for a partial rerun).
TOTAL_BUDGET_S = 480
#: The stack the run expects: the lock of the image's variant, else of the default one.
LOCK = ROOT / locks.lock_path(variables.read(variables.VARIANT) or versions.load().default.name)
#: Test files holding `pytest.mark.gpu` tests (tests/imagetools/gpukit/test_gpu_kit.py keeps this list
#: complete).
GPU_TEST_FILES = ("tests/ftenv/report/test_report.py", "tests/ftenv/selfcheck/test_selfcheck.py")
#: Deselected in the pytest step: the self-check steps below run the same four self-checks.
GPU_TESTS_RUN_AS_STEPS = "test_gpu_passes_with_the_fix_and_fails_without"
#: The compiled fast path's GPU benchmark (benchmarks/), run when it is there.
COMPILED_BENCHMARK_GLOB = "*compile*.py"
#: What FunASR's recipe runs, and what the self-check's recipe path looks for on PATH.
FUNASR_SCRIPT = "funasr-train-ds"
NO_GPU = "skipped: no GPU"


@dataclass
class Result:
    step: str
    expected: str
    got: str = ""
    ok: bool | None = None  # None: not applicable (not present, or not run)
    seconds: float = 0.0
    data: dict = field(default_factory=dict)


@dataclass
class Context:
    out: Path
    log: Path
    env: dict[str, str]
    deadline: float
    gpu: dict | None = None  # {"name", "sm", "driver", ...} once the environment step has read it
    facts: dict = field(default_factory=dict)
    steps: tuple[str, ...] = ()  # the steps this run runs, in order (the matrix leaves time for later ones)

    @property
    def exposed_at_0(self) -> bool:
        """Whether torch's rule puts cuDNN first here at =0 (the control must FAIL then)."""
        if not self.gpu:
            return False
        return bool(
            sdpa.cudnn_first_by_rule(
                self.facts.get("torch_version"),
                self.facts.get("cudnn_version"),
                tuple(self.gpu["sm"]),
                sdpa.interpret_deprioritized("0"),
            )
        )


# --- running one command under its budget ------------------------------------------------------


def run_logged(
    ctx: Context, title: str, cmd: list[str], budget_s: float, env: dict | None = None
) -> tuple[int | None, str]:
    """Run cmd with its own budget (cut to what the whole run has left); log everything.

    Returns (exit code, stdout+stderr); exit code None when the budget ran out (the process group
    is killed, torchrun's children included) or the whole run's time was gone before it started.
    """
    budget = min(budget_s, ctx.deadline - time.monotonic())
    with ctx.log.open("a") as log:
        log.write(f"\n===== {title}: {' '.join(cmd)}  (budget {max(budget, 0):.0f} s)\n")
    if budget < 1:
        note = f"[gpu_checks: not started: the run's {TOTAL_BUDGET_S} s are used up]"
        with ctx.log.open("a") as log:
            log.write(f"{note}\n===== {title}: timed out\n")
        return None, note
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env or ctx.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=budget)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        rc = None
        output += f"\n[gpu_checks: budget of {budget:.0f} s ran out; stopped]\n"
    with ctx.log.open("a") as log:
        log.write(output)
        log.write(f"===== {title}: {'timed out' if rc is None else f'exit {rc}'}\n")
    return rc, output


def json_tail(output: str) -> dict:
    """The JSON object a `--json` command printed, found among whatever else went to its output."""
    decoder = json.JSONDecoder()
    found: dict = {}
    for m in re.finditer(r"^\{", output, re.MULTILINE):
        try:
            obj, _ = decoder.raw_decode(output, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            found = obj
    return found


def ended(rc: int | None, output: str) -> str:
    if rc is None:
        return "timed out"
    last = next((ln for ln in reversed(output.strip().splitlines()) if ln.strip()), "")
    return f"exit {rc}: {last[-160:]}"


def ftenv(*args: str) -> list[str]:
    return [sys.executable, "-m", "ftenv.cli", *args]


def with_var(ctx: Context, value: str | None) -> dict[str, str]:
    env = dict(ctx.env)
    env.pop(variables.SDPA_DEPRIORITIZED, None)
    if value is not None:
        env[variables.SDPA_DEPRIORITIZED] = value
    return env


def status(r: Result) -> str:
    return {True: "as expected", False: "NOT as expected", None: "n/a"}[r.ok]


def render_table(results: list[Result]) -> str:
    lines = ["| step | expected | got | seconds | |", "|---|---|---|---|---|"]
    for r in results:
        got = r.got.replace("|", "/").replace("\n", " ")
        lines.append(f"| {r.step} | {r.expected} | {got} | {r.seconds:.1f} | {status(r)} |")
    return "\n".join(lines)
