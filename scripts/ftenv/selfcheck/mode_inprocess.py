"""`ftenv selfcheck` (the default mode): the tiny model's steps trained in this process
(ftenv.selfcheck.loop), optionally with a test stall per new shape, measured for the verdict."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ftenv.selfcheck.base import (
    Measured,
    environment,
    llm_dtype,
    pick_device,
    thresholds_from,
    tiny_dir,
)
from ftenv.selfcheck.loop import prepare, timed_steps, train


def run_inprocess(args: argparse.Namespace, workdir: Path) -> Measured:
    wall0 = time.perf_counter()
    tiny = tiny_dir(args.tiny, workdir)
    device = pick_device(args.device)
    undo = None
    if args.inject_stall:
        from ftenv.train import stall

        undo = stall.install(args.inject_stall)
    try:
        prepared = prepare(tiny, device, args.shapes, args.recur, args.seed, llm_dtype(args, device))
        seconds, losses = train(prepared.model, prepared.batches, device, seed=args.seed)
    finally:
        if undo:
            undo()
    return Measured(
        "in-process",
        timed_steps(prepared.plan, seconds),
        thresholds_from(args, device),
        extra={
            "environment": environment(device),
            "losses": losses,
            "tiny_dir": str(tiny),
            "injected_stall_s": args.inject_stall or None,
            "setup_seconds": prepared.setup_seconds,
            "wall_seconds": time.perf_counter() - wall0,
        },
    )
