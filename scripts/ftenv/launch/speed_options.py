"""The faster-training options of `ftenv finetune` and what they add to the trainer's variables and
overrides, in one place, so that their combinations are checked before torchrun.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.launch import compile_cache
from ftenv.launch.inputs import InputError
from ftenv.trainer import compile_setting

FUSED_ADAMW = ("optim_conf.fused", "true")


def accum_grad(settings: Mapping[str, object]) -> int:
    """The gradient accumulation the trainer will get, from its settings (the user's overrides over
    the recipe, ftenv.launch.overrides): 1 when unset or not a number (the trainer then says what
    is wrong)."""
    try:
        return int(str(settings.get(compile_setting.ACCUM_GRAD, 1)))
    except ValueError:
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
    """What the options add to the trainer's start: variables, recipe overrides, notes to print, and
    the compile caches' folder the launch makes (None when nothing is compiled)."""

    env: dict[str, str] = field(default_factory=dict)
    recipe: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cache_root: Path | None = None


def for_trainer(
    speed: SpeedOptions, settings: Mapping[str, object], env, output_dir: Path
) -> TrainerAdditions:
    """What the options (and FTENV_COMPILE / FTENV_BUCKETS already set in `env`) add to the trainer's
    start, nothing created; `settings` are the trainer's (gradient accumulation rules out CUDA graphs)."""
    sp = TrainerAdditions()
    wanted = compile_setting.requested(env, speed.compile, speed.compile_parts, speed.buckets)
    try:
        parts, _ = compile_setting.read(wanted)
        compile_setting.check_accumulation(parts, accum_grad(settings))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    caches = {}
    if parts:
        mount = compile_setting.cache_mount(env)
        sp.cache_root = compile_cache.cache_root(output_dir, mount)
        caches = compile_cache.cache_env(output_dir, env, mount=mount)
        where = ", ".join(f"{k}={v}" for k, v in caches.items()) or "as set in the environment"
        sp.notes.append(f"compiled: {', '.join(parts)}; compile caches: {where} (a re-run starts warm)")
    sp.env.update(compile_setting.trainer_env(wanted, caches))
    if speed.fused_adamw:
        sp.recipe.append(FUSED_ADAMW)
    return sp
