"""The faster-training options of `ftenv finetune`, in one block: their flags, and what they put in
the trainer's environment and overrides (launch_plan.py calls `plan`).

- `--compile`: FTENV_COMPILE=1, the default combination (ftenv.report.compile_setting.DEFAULT_PARTS),
  and Inductor's and Triton's caches under the output dir (ftenv.train.compile_cache);
- `--compile-parts PARTS` (compile_setting.PARTS): the parts one by one, for comparison;
- `--buckets SPEC`: FTENV_BUCKETS, batches padded to few shapes (ftenv.train.fastpath.buckets);
- `--fused-adamw`: `++optim_conf.fused=true` (FunASR passes optim_conf to torch.optim.AdamW).
The trainer entry (ftenv.train.funasr_entry) applies the first three in each training process.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.report import compile_setting
from ftenv.train import compile_cache
from ftenv.train.fastpath import buckets
from ftenv.train.inputs import InputError

FUSED_ADAMW = ("optim_conf.fused", "true")
#: FunASR's gradient accumulation setting (trainer_ds.Trainer: accum_grad, default 1).
ACCUM_GRAD = "train_conf.accum_grad"


def accum_grad(overrides) -> int:
    """The gradient accumulation the user's `++key=value` overrides ask for (1 when none or not a
    number: the trainer then says what is wrong). The launcher has parsed them already."""
    for item in overrides or []:
        key, _, value = item.lstrip("+").partition("=")
        if key.strip() == ACCUM_GRAD:
            try:
                return int(value.strip().strip("'\""))
            except ValueError:
                return 1
    return 1


@dataclass
class SpeedPlan:
    env: dict[str, str] = field(default_factory=dict)
    recipe: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compile",
        action="store_true",
        help="the faster training path: the LLM decoder's layers and the audio side compiled "
        "(torch.compile, dynamic shapes; GPU batches of 2+, no KV cache), FunASRNano's forward without "
        "host syncs, the LM head over labelled positions; caches kept under the output dir; same as "
        "FTENV_COMPILE=1 (docs/finetune.md)",
    )
    p.add_argument(
        "--compile-parts",
        metavar="PARTS",
        help=f"compile these parts instead (comma-separated: {', '.join(compile_setting.PARTS)}); "
        "for comparing the levers (docs/finetune.md)",
    )
    p.add_argument(
        "--buckets",
        metavar="SPEC",
        help="pad every batch to few shapes: LENGTHS[:BATCHES], e.g. 64 (lengths to multiples of 64, "
        "batch sizes to powers of two); padded rows and positions stay out of the loss",
    )
    p.add_argument(
        "--fused-adamw",
        action="store_true",
        help="the fused AdamW kernel (++optim_conf.fused=true)",
    )


def plan(args: argparse.Namespace, env, output_dir: Path, create: bool) -> SpeedPlan:
    """What the options (and FTENV_COMPILE / FTENV_BUCKETS already set) ask of the trainer."""
    sp = SpeedPlan()
    wanted = dict(env)
    if getattr(args, "compile_parts", None):
        wanted[compile_setting.ENV] = args.compile_parts
    elif getattr(args, "compile", False):
        wanted[compile_setting.ENV] = "1"
    if getattr(args, "buckets", None):
        wanted[compile_setting.BUCKETS_ENV] = args.buckets
    spec = wanted.get(compile_setting.BUCKETS_ENV)
    try:
        parts = compile_setting.compile_parts(wanted)
        if spec:
            buckets.parse(spec)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    accumulation = accum_grad(getattr(args, "overrides", None))
    if "cudagraphs" in parts and accumulation > 1:
        raise InputError(
            f"CUDA graphs with gradient accumulation ({ACCUM_GRAD}={accumulation}): each forward "
            "starts a new graph step and reuses the previous forward's output buffers, which the "
            "accumulated backward still needs; drop `cudagraphs` from --compile-parts or set "
            f"++{ACCUM_GRAD}=1"
        )
    if parts:
        sp.env[compile_setting.ENV] = wanted[compile_setting.ENV]
        caches = compile_cache.cache_env(
            output_dir, env, mount=env.get(compile_setting.CACHE_ENV), create=create
        )
        sp.env.update(caches)
        where = ", ".join(f"{k}={v}" for k, v in caches.items()) or "as set in the environment"
        sp.notes.append(f"compiled: {', '.join(parts)}; compile caches: {where} (a re-run starts warm)")
    if spec:
        sp.env[compile_setting.BUCKETS_ENV] = spec
    if getattr(args, "fused_adamw", False):
        sp.recipe.append(FUSED_ADAMW)
    return sp
