"""`ftenv selfcheck`: its parser; the check is ftenv.selfcheck's."""

from __future__ import annotations

import argparse

from ftenv import variables
from ftenv.launch.launch_plan import FinetuneOptions, plan_launch, trainer_overrides
from ftenv.selfcheck import mode_compile, runner
from ftenv.selfcheck.options import THRESHOLDS, SelfcheckOptions
from ftenv.selfcheck.runs_on import IMAGE_TINY_DIR

#: The step-time thresholds the user may set: option name, what it compares.
THRESHOLD_OPTIONS = (
    ("new-over-seen", "median new-shape step / median seen-shape step"),
    ("p95-over-median", "95th percentile step / median step"),
    ("max-over-median", "slowest step / median step"),
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "selfcheck",
        help="run a few real Fun-ASR-Nano fine-tune steps offline; FAIL if new batch shapes are slow",
        description="`ftenv selfcheck`: a few real Fun-ASR-Nano fine-tune steps, offline, and a verdict "
        "on step times.",
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
    for name, what in THRESHOLD_OPTIONS:
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


def options_of(args: argparse.Namespace) -> SelfcheckOptions:
    return SelfcheckOptions(
        recipe=args.recipe,
        compile=args.compile,
        device=args.device,
        tiny=args.tiny,
        workdir=args.workdir,
        keep=args.keep,
        shapes=args.shapes,
        recur=args.recur,
        seed=args.seed,
        llm_dtype=args.llm_dtype,
        json=args.json,
        new_over_seen=args.new_over_seen,
        p95_over_median=args.p95_over_median,
        max_over_median=args.max_over_median,
        inject_stall=args.inject_stall,
        recipe_epochs=args.recipe_epochs,
        loss_rtol=args.loss_rtol,
        force_recompiles=args.force_recompiles,
    )


def run(args: argparse.Namespace) -> int:
    return runner.run(options_of(args), recipe_overrides)


def recipe_overrides(**fields) -> list[str]:
    """The trainer's overrides `ftenv finetune` would pass for these options on one GPU, for the
    recipe check's own torchrun. Planned apart from the environment: the check is one process of
    its own in any job (Slurm's or torchrun's), and the overrides do not depend on it. Given from
    here because the launch plan sits on a floor the self-check's modules do not reach."""
    return trainer_overrides(plan_launch(FinetuneOptions(gpus_per_node=1, **fields), environ={}))
