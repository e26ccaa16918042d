"""Stop on a signal and resume, measured on the tiny model (`ftenv finetune`, CPU):

- seconds from SIGTERM to the exit: the signal right after a step line (no save in flight), and
  right after FunASR's `Save checkpoint:` line with a save after every step (a save in flight);
- steps lost: by a SIGTERM (the last step logged minus the step saved: the goal is 0) and by a
  SIGKILL of the whole process tree (at most the save interval);
- what a resume adds: launch to first step line, resumed against fresh;
- a full-size estimate of the save: the tiny checkpoint's bytes split into weights and optimizer
  state, scaled to Fun-ASR-Nano's parameter counts (stated assumptions, printed).

Usage: python benchmarks/stop_resume.py [--tiny DIR] [--workdir DIR]  (prints a Markdown table)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from ftenv import variables  # noqa: E402
from ftenv.trainer.funasr_cpu_shim import CPU_OVERRIDES  # noqa: E402

CPU_RUN = (*CPU_OVERRIDES, "++train_conf.max_epoch=1", "++dataset_conf.batch_size=300")
STEP = re.compile(rb"step_in_epoch: (\d+),")
#: Fun-ASR-Nano, as the estimate assumes: the Qwen3-0.6B decoder trained in bf16 (llm_dtype) with
#: AdamW moments in the same dtype; the audio encoder and adaptor frozen, kept in fp32.
FULL = {"trainable_params": 0.6e9, "trainable_bytes": 2, "frozen_params": 0.2e9, "frozen_bytes": 4}


def command(tiny: Path, out: Path, *extra: str) -> list[str]:
    from ftenv.selfcheck import tinymodel

    p = tinymodel.paths(tiny)
    return [
        sys.executable,
        "-m",
        "ftenv.cli",
        "finetune",
        "--model-dir",
        str(p.root),
        "--train",
        str(p.train_jsonl),
        "--valid",
        str(p.val_jsonl),
        "--output-dir",
        str(out),
        "--gpus-per-node",
        "1",
        *CPU_RUN,
        *extra,
    ]


def env() -> dict[str, str]:
    return variables.environment(
        {"PYTHONPATH": str(ROOT / "scripts"), variables.FUNASR_CPU_SHIM: "1", variables.REPORT: "0"}
    )


def run(cmd: list[str], trigger: bytes | None, sig: int = signal.SIGTERM) -> dict:
    """Run; send `sig` (to the whole tree for SIGKILL) after the first line holding `trigger`."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env(), start_new_session=True
    )
    found = {"first_step": None, "sent": None, "last_step": 0, "stopped_line": None}
    for line in proc.stdout:
        now = time.monotonic() - start
        m = STEP.search(line)
        if m:
            found["last_step"] = int(m.group(1))
            found["first_step"] = found["first_step"] or now
        if b"ftenv: stopped on" in line:
            found["stopped_line"] = now
        if trigger and found["sent"] is None and trigger in line:
            found["sent"] = now
            if sig == signal.SIGKILL:
                os.killpg(proc.pid, signal.SIGKILL)  # the tree at once, as a node loss would
            else:
                proc.send_signal(sig)
    found["rc"] = proc.wait()
    found["exit"] = time.monotonic() - start
    return found


def saved_step(out: Path) -> int:
    import torch

    data = torch.load(out / "model.pt", map_location="cpu", mmap=True)
    return int(data.get("step") or 0)


def checkpoint_split(path: Path) -> dict:
    import torch

    data = torch.load(path, map_location="cpu")

    def size(obj) -> int:
        if isinstance(obj, torch.Tensor):
            return obj.numel() * obj.element_size()
        if isinstance(obj, dict):
            return sum(size(v) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return sum(size(v) for v in obj)
        return 0

    trainable = sum(
        s["exp_avg"].numel()
        for s in data["optimizer"]["state"].values()
        if isinstance(s, dict) and "exp_avg" in s
    )
    total = sum(t.numel() for t in data["state_dict"].values())
    return {
        "file": path.stat().st_size,
        "weights": size(data["state_dict"]),
        "optimizer": size(data["optimizer"]),
        "params": total,
        "trainable": trainable,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", type=Path)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="ftenv-stop-"))
    tiny = args.tiny
    if tiny is None:
        from ftenv.selfcheck import tinymodel

        tiny = work / "tiny"
        tinymodel.build(tiny)
    rows = []
    # 1. SIGTERM right after step 3's line: the rest of step 4 (or the boundary), the save, the exit.
    a = run(command(tiny, work / "a"), b"step_in_epoch: 3,")
    lost = a["last_step"] - saved_step(work / "a")
    rows.append(
        ("SIGTERM, no save in flight", a["rc"], a["exit"] - a["sent"], a["stopped_line"] - a["sent"], lost)
    )
    # 2. A save after every step; SIGTERM right after FunASR's "Save checkpoint:" line of step 3.
    b = run(command(tiny, work / "b", "++train_conf.save_checkpoint_interval=1"), b"Save checkpoint: 0")
    lost = b["last_step"] - saved_step(work / "b")
    rows.append(
        ("SIGTERM, a save in flight", b["rc"], b["exit"] - b["sent"], b["stopped_line"] - b["sent"], lost)
    )
    # 3. SIGKILL of the whole tree after step 7's line, a checkpoint every 4 steps.
    c = run(
        command(tiny, work / "c", "++train_conf.save_checkpoint_interval=4"),
        b"step_in_epoch: 7,",
        signal.SIGKILL,
    )
    lost = c["last_step"] - saved_step(work / "c")
    rows.append(("SIGKILL (save interval 4)", c["rc"], c["exit"] - c["sent"], None, lost))
    # 4. Resume: launch to first step, resumed (folder a) against fresh (a's own start).
    r = run(command(tiny, work / "a"), b"step_in_epoch: " + str(saved_step(work / "a") + 1).encode() + b",")
    print("| case | exit | signal -> exit (s) | signal -> stop line (s) | steps lost |")
    print("|---|---|---|---|---|")
    for name, rc, to_exit, to_line, lost in rows:
        line = "-" if to_line is None else f"{to_line:.2f}"
        print(f"| {name} | {rc} | {to_exit:.2f} | {line} | {lost} |")
    print(
        f"\nlaunch to first step: fresh {a['first_step']:.1f} s, resumed {r['first_step']:.1f} s "
        f"(+{r['first_step'] - a['first_step']:.1f} s)"
    )
    split = checkpoint_split(work / "a" / "model.pt")
    print(f"\ntiny checkpoint: {split}")
    frozen = split["params"] - split["trainable"]
    print(
        f"tiny: {split['weights'] / split['params']:.2f} B/param of weights, "
        f"{split['optimizer'] / max(split['trainable'], 1):.2f} B/trainable param of optimizer state, "
        f"{split['file'] - split['weights'] - split['optimizer']} B else ({frozen} frozen params)"
    )
    weights = (
        FULL["trainable_params"] * FULL["trainable_bytes"] + FULL["frozen_params"] * FULL["frozen_bytes"]
    )
    moments = 2 * FULL["trainable_params"] * FULL["trainable_bytes"]
    total = weights + moments
    print(
        f"full size ({FULL}): weights {weights / 1e9:.2f} GB + AdamW moments {moments / 1e9:.2f} GB = "
        f"{total / 1e9:.2f} GB; at 1 GB/s {total / 1e9:.1f} s, at 0.2 GB/s {total / 0.2e9:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
