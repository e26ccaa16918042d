"""The faster-training options of `ftenv finetune` and what they add to the trainer's variables and
overrides, in one place, so that their combinations are checked before torchrun.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.train import compile_cache, compile_setting
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


@dataclass(frozen=True)
class SpeedOptions:
    """What the user asked of the faster path (--compile, --compile-parts, --buckets, --fused-adamw)."""

    compile: bool = False
    compile_parts: str | None = None
    buckets: str | None = None
    fused_adamw: bool = False


@dataclass
class TrainerAdditions:
    """What the options add to the trainer's start: variables, recipe overrides, notes to print."""

    env: dict[str, str] = field(default_factory=dict)
    recipe: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def for_trainer(speed: SpeedOptions, overrides, env, output_dir: Path, create: bool) -> TrainerAdditions:
    """What the options (and FTENV_COMPILE / FTENV_BUCKETS already set in `env`) add to the trainer's
    start; `overrides` are the user's `++key=value` (gradient accumulation rules out CUDA graphs)."""
    sp = TrainerAdditions()
    wanted = dict(env)
    if speed.compile_parts:
        wanted[variables.COMPILE] = speed.compile_parts
    elif speed.compile:
        wanted[variables.COMPILE] = "1"
    if speed.buckets:
        wanted[variables.BUCKETS] = speed.buckets
    spec = variables.read(variables.BUCKETS, wanted)
    try:
        parts = compile_setting.compile_parts(wanted)
        if spec:
            buckets.parse(spec)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    accumulation = accum_grad(overrides)
    if "cudagraphs" in parts and accumulation > 1:
        raise InputError(
            f"CUDA graphs with gradient accumulation ({ACCUM_GRAD}={accumulation}): each forward "
            "starts a new graph step and reuses the previous forward's output buffers, which the "
            "accumulated backward still needs; drop `cudagraphs` from --compile-parts or set "
            f"++{ACCUM_GRAD}=1"
        )
    if parts:
        sp.env[variables.COMPILE] = variables.read(variables.COMPILE, wanted)
        caches = compile_cache.cache_env(
            output_dir, env, mount=variables.read(variables.COMPILE_CACHE_DIR, env), create=create
        )
        sp.env.update(caches)
        where = ", ".join(f"{k}={v}" for k, v in caches.items()) or "as set in the environment"
        sp.notes.append(f"compiled: {', '.join(parts)}; compile caches: {where} (a re-run starts warm)")
    if spec:
        sp.env[variables.BUCKETS] = spec
    if speed.fused_adamw:
        sp.recipe.append(FUSED_ADAMW)
    return sp
