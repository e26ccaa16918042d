"""`ftenv selfcheck --compile`: the in-process steps with the compiled decoder forward beside an
eager run from the same weights, on the CPU too, so that any machine proves the compiled forward
does not recompile per new shape, matches eager's losses and keeps step times flat
(`--force-recompiles`, a TEST AID, shows the FAIL).
"""

from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

from ftenv.selfcheck.loop import prepare, timed_steps, train
from ftenv.selfcheck.measured import Measured
from ftenv.selfcheck.options import SelfcheckOptions, llm_dtype, thresholds_from
from ftenv.selfcheck.runs_on import environment, pick_device, tiny_dir
from ftenv.trainer.fastpath import compiled_decoder
from ftenv.watchdog import fixes

#: Recompiles allowed after the first compile, over the new shapes of the schedule.
MAX_RECOMPILES = 2
#: New shapes needed to call the compile dynamic (fewer prove too little: INCONCLUSIVE).
MIN_NEW_SHAPES = 8
#: Largest relative difference allowed between a compiled and the eager step's loss, per device.
#: CPU (fp32): rounding is ~6e-8 per operation; Inductor fuses and reorders reductions, which moves
#: each loss by ~1e-7 to 1e-6 relative, and those differences feed back through a few dozen AdamW
#: steps. 1e-4 leaves two orders of magnitude for that while still catching a wrong kernel (a
#: missing mask, a wrong scale or a stale graph moves the loss by 1e-2 or more). GPU: the LLM runs
#: in bf16 (rounding ~4e-3) and matmuls in TF32, and compiled kernels round differently from
#: eager ones, so 1e-2: loose enough for rounding, tight enough for a wrong kernel.
LOSS_RTOL = {"cpu": 1e-4, "cuda": 1e-2}


def max_relative_difference(got: list[float], want: list[float]) -> float:
    return max((abs(g - w) / max(abs(w), 1e-12) for g, w in zip(got, want, strict=True)), default=0.0)


def compile_findings(
    recompiles: int | None, n_new: int, loss_diff: float, loss_rtol: float, compiled_calls: int, n_steps: int
) -> tuple[list[str], list[str], str | None]:
    """(FAIL reasons, INCONCLUSIVE reasons, fix) of the compile-specific checks."""
    fails, unsure, fix = [], [], None
    if compiled_calls < n_steps:
        fails.append(f"only {compiled_calls} of {n_steps} steps ran the compiled forward")
    if recompiles is None:
        unsure.append("this torch has no Dynamo graph counter: recompiles unknown")
    elif recompiles > MAX_RECOMPILES:
        fails.append(f"{recompiles} recompiles over {n_new} new shapes (FAIL at > {MAX_RECOMPILES})")
        fix = fixes.RECOMPILE_FIX
    if n_new < MIN_NEW_SHAPES:
        unsure.append(f"only {n_new} new shapes ({MIN_NEW_SHAPES} needed to show the compile is dynamic)")
    if not loss_diff <= loss_rtol:  # NaN fails too
        fails.append(f"losses differ from eager by {loss_diff:.2e} relative (FAIL above {loss_rtol:g})")
    return fails, unsure, fix


def run_compiled(options: SelfcheckOptions, workdir: Path) -> Measured:
    wall0 = time.perf_counter()
    tiny = tiny_dir(options.tiny, workdir)
    device = pick_device(options.device)
    prepared = prepare(tiny, device, options.shapes, options.recur, options.seed, llm_dtype(options, device))
    reference = copy.deepcopy(prepared.model)  # the same weights, before any step
    eager_seconds, eager_losses = train(reference, prepared.batches, device, seed=options.seed)
    del reference

    dynamic = not options.force_recompiles
    switch = compiled_decoder.install(prepared.model, devices=(device,), dynamic=dynamic)
    graphs: list[int | None] = []
    try:
        seconds, losses = train(
            prepared.model,
            prepared.batches,
            device,
            seed=options.seed,
            after_step=lambda: graphs.append(compiled_decoder.graphs_compiled()),
        )
    finally:
        compiled_decoder.uninstall(prepared.model)
    steps = timed_steps(prepared.schedule, seconds)
    thresholds = thresholds_from(options, device)
    n_new = len({s.shape for s in steps[thresholds.warmup :]} - {s.shape for s in steps[: thresholds.warmup]})
    known = None not in graphs and bool(graphs)
    recompiles = graphs[-1] - graphs[0] if known else None
    loss_rtol = options.loss_rtol if options.loss_rtol is not None else LOSS_RTOL[device]
    loss_diff = max_relative_difference(losses, eager_losses)
    fails, unsure, fix = compile_findings(
        recompiles, n_new, loss_diff, loss_rtol, switch.calls["compiled"], len(steps)
    )
    return Measured(
        "compiled",
        steps,
        thresholds,
        extra={
            "environment": environment(device),
            "losses": losses,
            "tiny_dir": str(tiny),
            "setup_seconds": prepared.setup_seconds,
            "wall_seconds": time.perf_counter() - wall0,
            "compile": {
                "dynamic": dynamic,
                "forced_recompiles": bool(options.force_recompiles),
                "first_step_s": seconds[0],
                "eager_first_step_s": eager_seconds[0],
                "compile_s": seconds[0] - eager_seconds[0],
                "recompiles": recompiles,
                "max_recompiles": MAX_RECOMPILES,
                "graphs_after_step": graphs,
                "new_shapes": n_new,
                "compiled_calls": switch.calls["compiled"],
                "eager_losses": eager_losses,
                "loss_max_rel_diff": loss_diff,
                "loss_rtol": loss_rtol,
                "eager_median_step_s": statistics.median(eager_seconds[thresholds.warmup :]),
                "compiled_median_step_s": statistics.median(seconds[thresholds.warmup :]),
            },
        },
        fails=fails,
        unsure=unsure,
        fix=fix,
        default_fix=fixes.RECOMPILE_FIX,
    )
