"""The start-up report once per node, whichever way the container was started: launchers that skip
the entrypoint (pyxis by default, `apptainer exec`) get it from `ftenv finetune` and `ftenv
selfcheck`. A failing or hanging report never stops the command.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from ftenv import variables

DEFAULT_TIMEOUT_S = float(variables.default(variables.REPORT_TIMEOUT))
#: Set per task by Slurm, torchrun and enroot's PyTorch hook: only local rank 0 of a node prints.
LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID")


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether this process should print the report: not skipped, not shown yet, local rank 0."""
    if (
        variables.read(variables.REPORT, environ) == "0"
        or variables.read(variables.REPORT_SHOWN, environ) == "1"
    ):
        return False
    return all((environ.get(name) or "").strip() in ("0", "") for name in LOCAL_RANK_VARS)


def _timeout(environ: Mapping[str, str]) -> float:
    try:
        return max(1.0, variables.read_float(variables.REPORT_TIMEOUT, environ))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _in_process(compile_line: str, nodes: tuple[int | None, str | None]) -> tuple[str, str | None]:
    from ftenv.report import render

    try:
        return render.report_text(compile_line, *nodes) + "\n", None
    except Exception as exc:  # the report must never stop the command
        return "", f"{type(exc).__name__}: {exc}"


def _subprocess(env: Mapping[str, str]) -> tuple[str, str | None]:
    limit = _timeout(env)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ftenv.cli", "report"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env),
            timeout=limit,
        )
        return proc.stdout.decode(errors="replace"), (f"exit {proc.returncode}" if proc.returncode else None)
    except subprocess.TimeoutExpired as exc:
        return (exc.output or b"").decode(
            errors="replace"
        ), f"no answer within {limit:.0f} s ({variables.REPORT_TIMEOUT})"
    except OSError as exc:
        return "", exc.strerror or str(exc)


def show_once(
    who: str,
    environ: Mapping[str, str] | None = None,
    compile_line: str | None = None,
    nodes: tuple[int | None, str | None] = (None, None),
) -> bool:
    """Print the report to stderr unless `wanted` says no; True when it was attempted. By default
    in a process of its own with a time limit, so that a long-lived launcher holds no CUDA context;
    a command that uses the GPU anyway passes `compile_line` (and `nodes`: how many, which launcher)
    to render it here."""
    env = variables.environment() if environ is None else environ
    if not wanted(env):
        return False
    text, failure = _subprocess(env) if compile_line is None else _in_process(compile_line, nodes)
    if text:
        print(text, end="" if text.endswith("\n") else "\n", file=sys.stderr)
    if failure:
        print(f"{who}: the start-up report failed ({failure}); going on without it", file=sys.stderr)
    sys.stderr.flush()
    return True
