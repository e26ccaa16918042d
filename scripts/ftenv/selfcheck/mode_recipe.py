"""`ftenv selfcheck --recipe`: the real `funasr-train-ds`, through torchrun, on the tiny model.

It runs what upstream's finetune.sh runs (one process, the recipe's Hydra overrides from
ftenv.train.recipe.RECIPE_DEFAULTS: token batching with the sorting buffer, encoder and adaptor frozen,
LLM trainable, log_interval 1), with these changes for the tiny model and data: the model and data
paths, a writable output dir, batch_size 500 tokens (6000 would put the whole tiny set in one
batch), 2 epochs, no update check, and on a CPU `++device=cpu`, num_workers 0 and the CPU shim.

Why 2 epochs: the sampler sorts each buffer by declared length; the tiny data has no ties, so the
second epoch repeats every batch of the first. Epoch 1 is where each (batch, padded length) is new,
epoch 2 where it recurs. The trainer's per-step lines are read with ftenv.steps.funasr_log (step time =
data_load + forward + backward + optim, the time inside the step) and judged like the in-process
check.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from ftenv import variables
from ftenv.selfcheck import tinymodel
from ftenv.selfcheck.base import Measured, environment, pick_device, thresholds_from, tiny_dir
from ftenv.steps import funasr_log
from ftenv.train.funasr_cpu_shim import CPU_OVERRIDES
from ftenv.train.overrides import merge_overrides
from ftenv.train.recipe import RECIPE_DEFAULTS, hydra_run_dir

BATCH_TOKENS = 500
TIMEOUT_S = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def overrides(tiny: tinymodel.TinyPaths, out: Path, device: str, epochs: int) -> list[str]:
    mine = [
        f"++model={tiny.root}",
        f"++train_data_set_list={tiny.train_jsonl}",
        f"++valid_data_set_list={tiny.val_jsonl}",
        f"++output_dir={out / 'exp'}",
        f"++dataset_conf.batch_size={BATCH_TOKENS}",
        f"++train_conf.max_epoch={epochs}",
        "++disable_update=true",
        "++{}={}".format(*hydra_run_dir(out)),  # the launcher's rule: Hydra writes under out
    ]
    if device == "cpu":
        mine += CPU_OVERRIDES  # fp32 LLM on a CPU: see base.llm_dtype
    return merge_overrides(RECIPE_DEFAULTS, mine)


def command(tiny: tinymodel.TinyPaths, out: Path, device: str, epochs: int, use_entry: bool) -> list[str]:
    torchrun = shutil.which("torchrun")
    launcher = [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]
    launcher += [
        "--nnodes=1",
        "--nproc_per_node=1",
        "--node_rank=0",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
    ]
    if use_entry:
        program = ["-m", "ftenv.train.funasr_entry"]
    else:
        script = shutil.which("funasr-train-ds")
        if not script:
            raise FileNotFoundError("funasr-train-ds is not on PATH")
        program = [script]
    return [*launcher, *program, *overrides(tiny, out, device, epochs)]


def run_recipe(args: argparse.Namespace, workdir: Path) -> Measured:
    wall0 = time.perf_counter()
    tiny = tinymodel.paths(tiny_dir(args.tiny, workdir))
    device = pick_device(args.device)
    out = workdir / "recipe"
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(tinymodel.OFFLINE_ENV)
    # The child must import this same ftenv (an editable or a source checkout included).
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    use_entry = device == "cpu" or bool(args.inject_stall)
    if device == "cpu":
        env[variables.FUNASR_CPU_SHIM] = "1"
    if args.inject_stall:
        env[variables.TEST_SDPA_STALL_S] = str(args.inject_stall)
    cmd = command(tiny, out, device, args.recipe_epochs, use_entry)
    log = out / "train.log"
    t0 = time.perf_counter()
    with open(log, "wb") as fh:
        proc = subprocess.run(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=out, timeout=TIMEOUT_S, check=False
        )
    run_seconds = time.perf_counter() - t0
    scan = funasr_log.scan_files([str(log)])
    if proc.returncode != 0 or not scan.steps:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise RuntimeError(
            f"funasr-train-ds exited {proc.returncode} with {len(scan.steps)} step lines; log {log}:\n"
            + "\n".join(tail)
        )
    return Measured(
        "recipe",
        scan.steps,
        thresholds_from(args, device),
        extra={
            "environment": environment(device),
            "losses": [],
            "tiny_dir": str(tiny.root),
            "injected_stall_s": args.inject_stall or None,
            "command": cmd,
            "log": str(log),
            "val_lines": scan.val_lines,
            "setup_seconds": run_seconds - sum(s.seconds for s in scan.steps),
            "wall_seconds": time.perf_counter() - wall0,
        },
    )
