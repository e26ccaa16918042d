"""`ftenv selfcheck --recipe`: the real `funasr-train-ds` through torchrun and the trainer entry every
`ftenv finetune` runs, on the tiny model, with the recipe's overrides and 2 epochs (the first has
every shape new, the second repeats every batch), its step lines read and judged like the
in-process check, so that the fine-tune's own trainer path is checked.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ftenv import variables
from ftenv.selfcheck import tinymodel
from ftenv.selfcheck.measured import Measured
from ftenv.selfcheck.options import SelfcheckOptions, thresholds_from
from ftenv.selfcheck.runs_on import environment, pick_device, tiny_dir
from ftenv.trainer import ENTRY_MODULE
from ftenv.trainer.funasr_cpu_shim import CPU_OVERRIDES
from ftenv.watchdog import funasr_log

BATCH_TOKENS = 500
TIMEOUT_S = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: `ftenv finetune`'s planning and rendering of the trainer's overrides (launch_plan.plan_launch,
#: then trainer_overrides), given by the command: called with FinetuneOptions' fields.
TrainerOverrides = Callable[..., list[str]]


def overrides(
    tiny: tinymodel.TinyPaths, out: Path, device: str, epochs: int, plan: TrainerOverrides
) -> list[str]:
    """The trainer's overrides as `ftenv finetune` plans and renders them for the tiny model, its
    data and out/exp, with the check's own: small batches, `epochs` epochs and, on a CPU, fp32."""
    mine = [f"++dataset_conf.batch_size={BATCH_TOKENS}", f"++train_conf.max_epoch={epochs}"]
    if device == "cpu":
        mine += CPU_OVERRIDES  # fp32 LLM on a CPU: see options.llm_dtype
    return plan(
        model_dir=str(tiny.root),
        train=str(tiny.train_jsonl),
        valid=str(tiny.val_jsonl),
        output_dir=str(out / "exp"),
        overrides=tuple(mine),
        cwd=out,
    )


def command(
    tiny: tinymodel.TinyPaths, out: Path, device: str, epochs: int, plan: TrainerOverrides
) -> list[str]:
    """torchrun on one process with `ftenv finetune`'s trainer entry, on a CPU or a GPU alike."""
    torchrun = shutil.which("torchrun")
    launcher = [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]
    launcher += [
        "--nnodes=1",
        "--nproc_per_node=1",
        "--node_rank=0",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
    ]
    return [*launcher, "-m", ENTRY_MODULE, *overrides(tiny, out, device, epochs, plan)]


def run_recipe(options: SelfcheckOptions, workdir: Path, plan: TrainerOverrides) -> Measured:
    wall0 = time.perf_counter()
    tiny = tinymodel.paths(tiny_dir(options.tiny, workdir))
    device = pick_device(options.device)
    out = workdir / "recipe"
    out.mkdir(parents=True, exist_ok=True)
    env = variables.environment(tinymodel.OFFLINE_ENV)
    # The child must import this same ftenv (an editable or a source checkout included).
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    if device == "cpu":
        env[variables.FUNASR_CPU_SHIM] = "1"
    if options.inject_stall:
        env[variables.TEST_SDPA_STALL_S] = str(options.inject_stall)
    cmd = command(tiny, out, device, options.recipe_epochs, plan)
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
        thresholds_from(options, device),
        extra={
            "environment": environment(device),
            "losses": [],
            "tiny_dir": str(tiny.root),
            "injected_stall_s": options.inject_stall or None,
            "command": cmd,
            "log": str(log),
            "val_lines": scan.val_lines,
            "setup_seconds": run_seconds - sum(s.seconds for s in scan.steps),
            "wall_seconds": time.perf_counter() - wall0,
        },
    )
