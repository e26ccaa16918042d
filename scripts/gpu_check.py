#!/usr/bin/env python3
"""The GPU check: does this node show the per-shape attention stall, and does the fix remove it?

On a machine with a CUDA GPU it runs, each in a fresh process (the variable is read once per
process), with TORCH_CUDNN_SDPA_DEPRIORITIZED=1 and then =0:

- `ftenv selfcheck` (in-process, the tiny Fun-ASR-Nano) and, with --recipe, `ftenv selfcheck --recipe`
  (funasr-train-ds through torchrun);
- `ftenv probe` (first vs second call of padded bf16 attention on new shapes);

and prints one markdown table with the GPU, driver, torch and cuDNN. Expected on sm_90/sm_100/sm_103
with cuDNN >= 9.15.1 (torch 2.10/2.11): PASS at 1 and FAIL at 0 (the control: the check sees the
real stall). Exit 0 when the results are as expected, 1 otherwise, 0 with a message without a GPU.

Run from a checkout with the project's venv, or inside the image:
    python3 scripts/gpu_check.py [--recipe]
    docker run --gpus all -v "$PWD/scripts:/s:ro" IMAGE python3 /s/gpu_check.py --recipe
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ftenv.report import sdpa  # noqa: E402

VAR = sdpa.ENV_VAR


def ftenv(args: list[str], value: str | None = None, timeout: int = 900) -> tuple[int, dict, float]:
    env = dict(os.environ)
    if value is not None:
        env[VAR] = value
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH")) if p)
    env["FTENV_REPORT"] = "0"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ftenv.cli", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - t0
    try:
        return proc.returncode, json.loads(proc.stdout), wall
    except json.JSONDecodeError:
        return proc.returncode, {"error": (proc.stdout + proc.stderr)[-2000:]}, wall


def _x(v) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _s(v) -> str:
    return "n/a" if v is None else f"{v:.3f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--recipe", action="store_true", help="also run the recipe path (funasr-train-ds)")
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="without a GPU, run the same table on the CPU (tries the script; NOT evidence about GPUs)",
    )
    args = ap.parse_args()
    device = ["--device", "cpu"] if args.cpu else []

    _, report, _ = ftenv(["report"])
    facts = report.get("facts", {})
    gpus = facts.get("gpus") or []
    if not gpus and not args.cpu:
        print("gpu_check: no CUDA GPU visible: nothing to compare (this check runs only on a GPU)")
        return 0
    if args.cpu:
        print("gpu_check --cpu: CPU run to try the script; these numbers say nothing about GPUs")
        g = {"name": "CPU", "sm": (0, 0)}
    else:
        g = gpus[0]
    sm = tuple(g["sm"])
    cudnn = facts.get("cudnn_version") or 0
    exposed_at_0 = bool(
        sdpa.cudnn_first_by_rule(facts.get("torch_version"), cudnn, sm, sdpa.interpret_env("0"))
    )
    c = sdpa.cudnn_name(cudnn or None)
    print(
        f"GPU {g['name']} (sm_{sm[0]}{sm[1]}), driver {facts.get('driver_version') or 'unknown'}, "
        f"torch {facts.get('torch_version')}, cuDNN {c}, image {facts.get('image') or 'none (checkout)'}"
    )
    at_0 = "FAIL at =0 (cuDNN goes first here)" if exposed_at_0 else "PASS at =0 too (cuDNN never first here)"
    print(f"expected: PASS at {VAR}=1; {at_0}")
    print()
    modes = [("in-process", [])] + ([("recipe", ["--recipe"])] if args.recipe else [])
    header = (
        f"| {VAR} | self-check | verdict | new-shape median | seen-shape median | new/seen | p95/median "
        "| max/median | wall | probe backend | probe cost per new shape (current) | (cuDNN first) |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    ok = True
    for value in ("1", "0"):
        _, probe, _ = ftenv(["probe", *device], value)
        pm = probe.get("modes", {})
        backend = ",".join(sorted({r["backend"] for r in pm.get("current", {}).get("rows", [])})) or "n/a"
        cost_now = pm.get("current", {}).get("median_cost")
        cost_cudnn = pm.get("cudnn-first", {}).get("median_cost")
        for name, extra in modes:
            rc, r, wall = ftenv(["selfcheck", *extra, *device], value)
            s = r.get("summary", {})
            verdict = r.get("verdict", "ERROR")
            print(
                f"| {value} | {name} | {verdict} (exit {rc}) | {_s(s.get('new_median'))} | "
                f"{_s(s.get('seen_median'))} | {_x(s.get('new_over_seen'))} | {_x(s.get('p95_over_median'))} "
                f"| {_x(s.get('max_over_median'))} | {wall:.1f} s | {backend} | {_s(cost_now)} "
                f"| {_s(cost_cudnn)} |"
            )
            want = "PASS" if value == "1" else ("FAIL" if exposed_at_0 else "PASS")
            if verdict != want:
                ok = False
                print(
                    f"UNEXPECTED: {name} at {VAR}={value} gave {verdict}, expected {want}: "
                    f"{r.get('error', '')}"
                )
    print()
    print("as expected" if ok else "NOT as expected: see docs/selfcheck.md")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
