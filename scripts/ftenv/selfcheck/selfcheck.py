"""`ftenv selfcheck`: a few real Fun-ASR-Nano fine-tune steps, offline, and a verdict on step times.

The stall it guards against: with cuDNN first in torch's attention order (torch >= 2.10 on sm_90,
sm_100, sm_103 unless TORCH_CUDNN_SDPA_DEPRIORITIZED=1), a training step is slow the FIRST time its
(batch, padded length) appears in the process, and fast when that shape recurs. So the check

1. loads the tiny offline Fun-ASR-Nano (ftenv.selfcheck.tinymodel: FunASR's packaged `FunASRNano`, a Qwen3
   LLM in bf16 with transformers' sdpa attention and the padding mask) through FunASR's AutoModel;
2. builds batches with FunASR's own dataset class and collator from the tiny ChatML JSONL, on a
   schedule in which every (batch, padded length) first appears and then recurs;
3. trains as the recipe does (encoder and adaptor frozen, LLM trainable, AdamW, grad clip 10),
   timing each step with the GPU synchronised;
4. compares the steps on new shapes with the steps on seen shapes (ftenv.steps.stats) and says
   PASS or FAIL, why, and what to do.

`--recipe` runs the real `funasr-train-ds` through torchrun instead (mode_recipe.py);
`--compile` runs the steps with the compiled decoder forward beside an eager run (mode_compile.py).
This module is the command line; the package docstring says how the wing's modules divide the work.
Exit codes: 0 PASS, 1 FAIL, 3 INCONCLUSIVE, 2 could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from ftenv import variables
from ftenv.outcome import EXIT, UNUSABLE
from ftenv.report import startup
from ftenv.selfcheck import mode_compile, mode_inprocess, mode_recipe, render
from ftenv.selfcheck.base import IMAGE_TINY_DIR, THRESHOLDS
from ftenv.selfcheck.verdict import verdict_of
from ftenv.train import cache_dirs


def run(args: argparse.Namespace) -> int:
    cache_dirs.redirect("ftenv selfcheck")  # first: the steps import libraries that read them
    startup.show_once("ftenv selfcheck", in_process=True)  # unless the entrypoint showed it
    if not args.compile and (args.force_recompiles or args.loss_rtol is not None):
        print("ftenv selfcheck: --force-recompiles and --loss-rtol need --compile", file=sys.stderr)
        return UNUSABLE
    if args.compile and args.inject_stall:
        print("ftenv selfcheck: --inject-stall tests the eager steps: drop --compile", file=sys.stderr)
        return UNUSABLE
    own_workdir = not args.workdir
    workdir = Path(tempfile.mkdtemp(prefix="ftenv-selfcheck-")) if own_workdir else Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rc = _run_in(args, workdir)
    if own_workdir:
        if rc == 0 and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"ftenv selfcheck: outputs kept in {workdir}", file=sys.stderr)
    return rc


def _run_in(args: argparse.Namespace, workdir: Path) -> int:
    try:
        # FunASR prints to stdout (its version, tables): keep stdout for the result alone.
        with contextlib.redirect_stdout(sys.stderr):
            if args.recipe:
                measured = mode_recipe.run_recipe(args, workdir)
            elif args.compile:
                measured = mode_compile.run_compiled(args, workdir)
            else:
                measured = mode_inprocess.run_inprocess(args, workdir)
            result = verdict_of(measured)
    except Exception as exc:  # say what went wrong in one line, keep the traceback for --json
        import traceback

        msg = f"ftenv selfcheck could not run: {type(exc).__name__}: {exc}"
        if args.json:
            print(json.dumps({"verdict": "ERROR", "error": msg, "traceback": traceback.format_exc()}))
        else:
            traceback.print_exc()
            print(msg, file=sys.stderr)
        return UNUSABLE
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render.render(result))
    return EXIT.get(result["verdict"], UNUSABLE)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "selfcheck",
        help="run a few real Fun-ASR-Nano fine-tune steps offline; FAIL if new batch shapes are slow",
        description=(__doc__ or "").split("\n\n")[0],
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--recipe", action="store_true", help="run the real funasr-train-ds via torchrun")
    mode.add_argument(
        "--compile",
        action="store_true",
        help="the same steps with the compiled decoder forward (CPU too), beside an eager run: "
        "recompiles over new shapes, compile time, losses vs eager",
    )
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument(
        "--tiny", help=f"tiny model dir (default: ${variables.TINY_DIR}, {IMAGE_TINY_DIR}, or build one)"
    )
    p.add_argument(
        "--workdir", help="writable dir for outputs (default: a new temp dir, removed after a PASS)"
    )
    p.add_argument("--keep", action="store_true", help="keep the default temp dir even after a PASS")
    p.add_argument("--shapes", type=int, default=8, help="new shapes after warm-up (default 8)")
    p.add_argument("--recur", type=int, default=3, help="seen-shape steps after each new one (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--llm-dtype",
        choices=["auto", "bf16", "fp32"],
        default="auto",
        help="LLM dtype (default: bf16 on a GPU, fp32 on a CPU)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable result on stdout")
    for name, what in (
        ("new-over-seen", "median new-shape step / median seen-shape step"),
        ("p95-over-median", "95th percentile step / median step"),
        ("max-over-median", "slowest step / median step"),
    ):
        key = name.replace("-", "_")
        gpu, cpu = getattr(THRESHOLDS["cuda"], key), getattr(THRESHOLDS["cpu"], key)
        p.add_argument(
            f"--{name}", type=float, help=f"FAIL when {what} >= this (defaults: GPU {gpu:g}, CPU {cpu:g})"
        )
    p.add_argument(
        "--inject-stall",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="TEST AID: sleep this long in attention the first time each shape is seen",
    )
    p.add_argument("--recipe-epochs", type=int, default=2, help="--recipe: epochs (default 2)")
    p.add_argument(
        "--loss-rtol",
        type=float,
        help="--compile: largest relative loss difference to eager (defaults: CPU "
        f"{mode_compile.LOSS_RTOL['cpu']:g}, GPU {mode_compile.LOSS_RTOL['cuda']:g})",
    )
    p.add_argument(
        "--force-recompiles",
        action="store_true",
        help="--compile TEST AID: compile with dynamic=False, so that every new shape recompiles",
    )
    p.set_defaults(func=run)
