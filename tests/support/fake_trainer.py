"""A stand-in for FunASR's trainer: prints its per-step log lines (tests/support/steplogs.py) with real
delays, the way Hydra's console handler does (to stdout by default), plus noise on stderr.

    python tests/support/fake_trainer.py [--fixed] [--ranks N] [--steps N] [--scale S] [--stream err]
        [--pause-after STEP] [--exit CODE] [--kill] [--raise] [--recipe]

--scale S sleeps S x each step's logged time before printing it (0: no sleep).
--pause-after STEP: after printing that step, print READY to stderr and wait for a line on stdin.
--exit CODE: exit with CODE at the end; --kill: end with SIGKILL instead (exit status 137);
--raise: end with an uncaught KeyError('input_ids') instead (FunASR's collator on an emptied batch).
--recipe: replay steplogs.recipe_run (3 epochs, validation and checkpoint saves, epoch ends) with
its delays x --scale: a step line after its phases, a `val` line after half the validation, the
`Checkpoint saved` line after the save.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from steplogs import NOISE, SAVE_S, VALIDATION_S, field_report_log, flood, recipe_run

STEP = re.compile(r"- train, rank: (\d+), .*total step: (\d+),")
PHASES = re.compile(r"'(?:data_load|forward_time|backward_time|optim_time)': '([\d.]+)'")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--fixed", action="store_true")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many step lines (0: all)")
    p.add_argument("--scale", type=float, default=0.0)
    p.add_argument("--stream", choices=("out", "err"), default="out")
    p.add_argument("--pause-after", type=int, default=0)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--kill", action="store_true")
    p.add_argument("--raise", dest="raise_", action="store_true")
    p.add_argument("--recipe", action="store_true")
    p.add_argument("--flood", type=int, default=0, help="write this many MB to each stream instead")
    a = p.parse_args()
    if a.flood:
        return flood_both(a.flood << 20)
    if a.recipe:
        return replay_recipe(a.scale)
    lines, runs = field_report_log(ranks=a.ranks, fixed=a.fixed)
    seconds = {(s.rank, s.index): s.seconds for run in runs for s in run}
    out = sys.stdout if a.stream == "out" else sys.stderr
    print(NOISE[2], file=sys.stderr, flush=True)
    printed = 0
    for line in lines:
        m = STEP.search(line)
        if m:
            rank, index = int(m.group(1)), int(m.group(2))
            if a.scale:
                time.sleep(a.scale * seconds[(rank, index)])
            printed += 1
        out.write(line + "\n")
        out.flush()
        if a.pause_after and printed == a.pause_after and m:
            print("READY", file=sys.stderr, flush=True)
            sys.stdin.readline()
        if a.steps and printed >= a.steps:
            break
    print("training done", file=sys.stderr, flush=True)
    if a.raise_:
        batch: dict = {}
        return batch["input_ids"]
    if a.kill:
        os.kill(os.getpid(), signal.SIGKILL)
    return a.exit


def replay_recipe(scale: float) -> int:
    """steplogs.recipe_run(stall=False) in real time x scale (see the module's docstring)."""
    for line in recipe_run(stall=False).lines:
        if STEP.search(line):
            time.sleep(scale * sum(map(float, PHASES.findall(line))))
        elif "- val, rank:" in line:
            time.sleep(scale * VALIDATION_S / 2)
        elif line.startswith("Checkpoint saved to"):
            time.sleep(scale * SAVE_S)
        print(line, flush=True)
    return 0


def flood_both(total: int) -> int:
    """Write steplogs.flood(0, ...) to stdout and flood(1, ...) to stderr, alternating."""
    streams = [(sys.stdout.buffer, flood(0, total)), (sys.stderr.buffer, flood(1, total))]
    while streams:
        for entry in list(streams):
            out, gen = entry
            piece = next(gen, None)
            if piece is None:
                streams.remove(entry)
                continue
            out.write(piece)
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
