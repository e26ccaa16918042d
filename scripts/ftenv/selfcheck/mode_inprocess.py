"""`ftenv selfcheck` (the default mode): the tiny model's steps trained in this process, optionally
with a test stall per new shape, measured for the verdict."""

from __future__ import annotations

import time
from pathlib import Path

from ftenv.selfcheck.loop import prepare, timed_steps, train
from ftenv.selfcheck.measured import Measured
from ftenv.selfcheck.options import SelfcheckOptions, llm_dtype, thresholds_from
from ftenv.selfcheck.runs_on import environment, pick_device, tiny_dir


def run_inprocess(options: SelfcheckOptions, workdir: Path) -> Measured:
    wall0 = time.perf_counter()
    tiny = tiny_dir(options.tiny, workdir)
    device = pick_device(options.device)
    undo = None
    if options.inject_stall:
        from ftenv.trainer import stall

        undo = stall.install(options.inject_stall)
    try:
        prepared = prepare(
            tiny, device, options.shapes, options.recur, options.seed, llm_dtype(options, device)
        )
        seconds, losses = train(prepared.model, prepared.batches, device, seed=options.seed)
    finally:
        if undo:
            undo()
    return Measured(
        "in-process",
        timed_steps(prepared.schedule, seconds),
        thresholds_from(options, device),
        extra={
            "environment": environment(device),
            "losses": losses,
            "tiny_dir": str(tiny),
            "injected_stall_s": options.inject_stall or None,
            "setup_seconds": prepared.setup_seconds,
            "wall_seconds": time.perf_counter() - wall0,
        },
    )
