"""What every `ftenv selfcheck` mode shares: where the tiny model is, which device, the thresholds,
the environment it ran in, and the judged result (the verdict and its reasons) as a dict.

The in-process loop (selfcheck_loop), the recipe run (selfcheck_recipe) and the compiled mode
(selfcheck_compile) import this; it imports none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import replace
from pathlib import Path

from ftenv.report.sdpa import ENV_VAR, FIX, interpret_env
from ftenv.steps import stats, thresholds
from ftenv.train import tinymodel

#: Where the image keeps the tiny model (built at image build time, read-only for the user).
IMAGE_TINY_DIR = "/opt/ftenv/tiny"
TINY_ENV = "FTENV_TINY_DIR"

EXIT = {stats.PASS: 0, stats.FAIL: 1, stats.INCONCLUSIVE: 3}
EXIT_ERROR = 2

#: The self-check's warm-up and per-device thresholds live with every other threshold.
WARMUP = thresholds.SELFCHECK_WARMUP
THRESHOLDS = thresholds.SELFCHECK


def tiny_dir(requested: str | None, workdir: Path) -> Path:
    """The tiny model to use: --tiny, $FTENV_TINY_DIR, the image's copy, or one built now."""
    for candidate in (requested, os.environ.get(TINY_ENV), IMAGE_TINY_DIR):
        if candidate and tinymodel.is_built(candidate):
            return Path(candidate)
        if candidate and candidate == requested:
            raise FileNotFoundError(f"{candidate} holds no tiny model (build one: ftenv tinymodel DIR)")
    out = workdir / "tiny"
    print(f"building the tiny model in {out} ...", file=sys.stderr)
    tinymodel.build(out)
    return out


def pick_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no GPU")
    return requested


def environment(device: str) -> dict:
    import torch

    env = {
        "device": device,
        "torch": torch.__version__,
        "cudnn": None,
        ENV_VAR: os.environ.get(ENV_VAR),
        "cpu_threads": torch.get_num_threads(),
    }
    with contextlib.suppress(Exception):
        env["cudnn"] = torch.backends.cudnn.version()
    if device == "cuda":
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        env["gpu"] = p.name
        env["sm"] = f"sm_{p.major}{p.minor}"
    return env


def llm_dtype(args: argparse.Namespace, device: str) -> str:
    """bf16 on a GPU, as the recipe trains (and as cuDNN attention needs); fp32 on a CPU, where
    bf16 matmuls go through oneDNN, which builds a primitive per new shape: a CPU-only per-shape
    cost that would mask what the check is for."""
    if args.llm_dtype != "auto":
        return args.llm_dtype
    return "bf16" if device == "cuda" else "fp32"


def thresholds_from(args: argparse.Namespace, device: str) -> stats.Thresholds:
    base = THRESHOLDS["cuda" if device == "cuda" else "cpu"]
    changes = {
        name: getattr(args, name)
        for name in ("new_over_seen", "p95_over_median", "max_over_median")
        if getattr(args, name, None) is not None
    }
    return replace(base, **changes)


def judge(mode: str, steps: list[stats.Step], thresholds: stats.Thresholds, **extra) -> dict:
    """The result of one self-check run: the step-time verdict with its reasons and fix, the
    thresholds, every step, and what the mode adds (`extra`)."""
    # The fix's wording follows the variable: already 1 -> how to find the other per-shape cost.
    summary = stats.summarize(steps, thresholds, env=interpret_env(extra.get("environment", {}).get(ENV_VAR)))
    result = {
        "mode": mode,
        "verdict": summary.verdict,
        "summary": summary.to_dict(),
        "thresholds": {
            "new_over_seen": thresholds.new_over_seen,
            "p95_over_median": thresholds.p95_over_median,
            "max_over_median": thresholds.max_over_median,
            "warmup": thresholds.warmup,
        },
        "steps": [s.to_dict() for s in stats.mark_new_shapes(steps)],
    }
    result.update(extra)
    if summary.verdict == stats.FAIL and summary.fix is None:
        result["summary"]["fix"] = (
            f"step times vary for a reason other than new shapes; if {FIX} is already set, run "
            "again on an idle machine, and read docs/selfcheck.md"
        )
    return result
