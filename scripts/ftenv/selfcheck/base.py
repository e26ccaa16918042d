"""What every self-check mode shares (the options, the tiny model's place, the device, thresholds,
the environment, `Measured`), so that no mode imports another mode or the verdict."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from ftenv import variables
from ftenv.attention import facts
from ftenv.selfcheck import tinymodel
from ftenv.steps import thresholds
from ftenv.steps.step import Step

#: Where the image keeps the tiny model (built at image build time, read-only for the user).
IMAGE_TINY_DIR = "/opt/ftenv/tiny"

#: The self-check's warm-up and per-device thresholds live with every other threshold.
WARMUP = thresholds.SELFCHECK_WARMUP
THRESHOLDS = thresholds.SELFCHECK


def tiny_dir(requested: str | None, workdir: Path) -> Path:
    """The tiny model to use: --tiny, $FTENV_TINY_DIR, the image's copy, or one built now."""
    for candidate in (requested, variables.read(variables.TINY_DIR), IMAGE_TINY_DIR):
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
    """The stack the check ran on, in the JSON form `ftenv probe` records too."""
    return facts.read_stack(device).as_dict()


@dataclass(frozen=True)
class SelfcheckOptions:
    """What `ftenv selfcheck` was asked for (ftenv.commands.selfcheck), shared by its modes."""

    recipe: bool = False
    compile: bool = False
    device: str = "auto"  # auto, cuda or cpu
    tiny: str | None = None
    workdir: str | None = None
    keep: bool = False
    shapes: int = 8
    recur: int = 3
    seed: int = 0
    llm_dtype: str = "auto"  # auto, bf16 or fp32
    json: bool = False
    new_over_seen: float | None = None  # None: THRESHOLDS' value for the device
    p95_over_median: float | None = None
    max_over_median: float | None = None
    inject_stall: float = 0.0  # test aid: seconds of sleep on each first-seen shape
    recipe_epochs: int = 2
    loss_rtol: float | None = None  # None: mode_compile.LOSS_RTOL's value for the device
    force_recompiles: bool = False  # test aid: dynamic=False


def llm_dtype(options: SelfcheckOptions, device: str) -> str:
    """bf16 on a GPU, as the recipe trains (and as cuDNN attention needs); fp32 on a CPU, where
    bf16 matmuls go through oneDNN, which builds a primitive per new shape: a CPU-only per-shape
    cost that would mask what the check is for."""
    if options.llm_dtype != "auto":
        return options.llm_dtype
    return "bf16" if device == "cuda" else "fp32"


def thresholds_from(options: SelfcheckOptions, device: str) -> thresholds.Thresholds:
    base = THRESHOLDS["cuda" if device == "cuda" else "cpu"]
    changes = {
        name: getattr(options, name)
        for name in ("new_over_seen", "p95_over_median", "max_over_median")
        if getattr(options, name) is not None
    }
    return replace(base, **changes)


@dataclass
class Measured:
    """What one self-check mode measured: its timed steps and thresholds, what goes into the result
    as is (`extra`: environment, losses, the compile figures ...), and the mode's own findings that
    the verdict adds to the step-time ones (the compiled mode's recompiles and losses)."""

    mode: str
    steps: list[Step]
    thresholds: thresholds.Thresholds
    extra: dict = field(default_factory=dict)
    fails: list[str] = field(default_factory=list)  # FAIL reasons of the mode's own checks
    unsure: list[str] = field(default_factory=list)  # INCONCLUSIVE reasons of the mode's own checks
    fix: str | None = None  # the fix for `fails`, before the step-time fix
    default_fix: str | None = None  # the fix for `fails` when neither names one
