"""What `ftenv selfcheck` was asked for, and what follows from it for every mode (the thresholds,
the LLM's dtype), so that no mode imports another mode or the verdict."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ftenv.watchdog import thresholds

#: The self-check's warm-up and per-device thresholds live with every other threshold.
WARMUP = thresholds.SELFCHECK_WARMUP
THRESHOLDS = thresholds.SELFCHECK


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
