#!/usr/bin/env python3
"""Every GPU check of this project in one run, within a fixed time, its results in one folder.

    python3 scripts/gpu_checks.py [--wheels DIR] [--out DIR] [--only STEP,...] [--list]

Made for a GPU machine that has torch and transformers but not FunASR: `make gpu-kit` builds the
wheels it lacks, which the `install` step puts in a folder of their own (pip --no-index --no-deps
--target, nothing fetched); in the image, or in a checkout with the whole stack, leave out --wheels.
Every step runs even if an earlier one failed, each under its own time budget, all of them within
TOTAL_BUDGET_S. A step that needs a GPU says "skipped: no GPU" where there is none, so the whole run
can be rehearsed on a CPU machine (tests/imagetools/gpukit/test_gpu_kit.py does, in CI).

Results go to OUT (default $OUT, else ./gpu-results): summary.md (one line per step: expected, got,
seconds), summary.json (the same, with what each step read), steps.log (every command and its
output). `python -m imagetools gpukit results OUT` turns them into docs/gpu-results.md's Results.
Exit 0 when every step ended as expected, 1 otherwise, 2 on bad arguments.

Only the standard library is imported here before the kit is installed: this file must start on a
bare python3. It is longer than most modules because it is the one list of the GPU checks with their
expectations; the checks themselves live in ftenv and benchmarks/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))

from ftenv import outcome, variables  # noqa: E402
from imagetools.gpukit.gpu_run import TOTAL_BUDGET_S, Context, Result, render_table, status  # noqa: E402
from imagetools.gpukit.gpu_setup import check_stack  # noqa: E402
from imagetools.gpukit.gpu_steps import STEPS, dispatch  # noqa: E402

# --- the run -----------------------------------------------------------------------------------


def run_all(args: argparse.Namespace, site: Path) -> int:
    start = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = variables.environment({"PYTHONUNBUFFERED": "1", variables.REPORT: "0"})
    paths = [str(site), str(SCRIPTS)] if args.wheels else [str(SCRIPTS)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])
    bins = [str(site / "bin"), os.path.dirname(sys.executable), env.get("PATH")]
    env["PATH"] = os.pathsep.join(bins)
    ctx = Context(out, out / "steps.log", env, deadline=start + args.budget)
    ctx.log.write_text(f"gpu_checks: python {sys.version.split()[0]} at {sys.executable}\n")
    wanted = STEPS if not args.only else args.only
    # install and environment always run: the others need them
    ctx.steps = tuple(n for n in STEPS if n in wanted or n in ("install", "environment"))
    results = []
    for name in ctx.steps:
        t0 = time.monotonic()
        try:
            r = dispatch(ctx, name, args.wheels, site)
        except Exception as exc:  # one broken step must not stop the others
            r = Result(name, "runs", f"the step itself broke: {type(exc).__name__}: {exc}", False)
        r.seconds = time.monotonic() - t0
        results.append(r)
        print(f"{r.step}: {status(r)} in {r.seconds:.1f} s: {r.got}", flush=True)
    total = time.monotonic() - start
    table = render_table(results)
    summary = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "total_seconds": round(total, 1),
        "budget_seconds": args.budget,
        "gpu": ctx.gpu,
        "facts": {k: ctx.facts.get(k) for k in ("torch_version", "torch_cuda", "cudnn_version")}
        | {k: ctx.facts.get(k) for k in ("driver_version", "transformers_version", "funasr_version")},
        "python": sys.version.split()[0],
        "steps": [asdict(r) for r in results],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(f"{table}\n\ntotal {total:.1f} s (budget {args.budget} s)\n")
    print()
    print(table)
    print(f"\ntotal {total:.1f} s of {args.budget} s; results in {out}")
    return 0 if all(r.ok is not False for r in results) else outcome.EXIT[outcome.FAIL]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--wheels", type=Path, help="folder of the kit's wheels (made by `make gpu-kit`)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu-results", help="results folder")
    ap.add_argument("--site", help="where the kit goes (default: a new temporary folder)")
    ap.add_argument("--only", type=lambda s: s.split(","), help="these steps only (comma-separated)")
    ap.add_argument("--budget", type=int, default=TOTAL_BUDGET_S, help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="print the steps and exit")
    ap.add_argument("--check-stack", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.check_stack:
        return check_stack()
    if args.list:
        print("\n".join(STEPS))
        return 0
    unknown = sorted(set(args.only or []) - set(STEPS))
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}: choose from {', '.join(STEPS)} (see --list)")
    if args.wheels is not None and not args.wheels.is_dir():
        ap.error(f"--wheels {args.wheels}: no such folder; build the kit with `make gpu-kit`")
    if args.site:
        return run_all(args, Path(args.site))
    with tempfile.TemporaryDirectory(prefix="ftenv-gpukit-") as site:  # the kit goes with the run
        return run_all(args, Path(site))


if __name__ == "__main__":
    sys.exit(main())
