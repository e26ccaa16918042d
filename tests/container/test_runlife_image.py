"""A run's life in the image: `podman stop` (SIGTERM to tini, PID 1) stops `ftenv finetune` on the tiny
model with a checkpoint of the step reached and exit 75, through the image's real chain (tini ->
the entrypoint -> ftenv finetune, now the watchdog -> torchrun -> the rank); the same `podman run`
again resumes at that step and finishes.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

CPU_RUN = [
    "++device=cpu",
    "++dataset_conf.num_workers=0",
    "++llm_conf.llm_dtype=fp32",
    "++train_conf.max_epoch=1",
    "++dataset_conf.batch_size=300",
]


def test_podman_stop_saves_and_the_same_command_resumes(image, tmp_path_factory, tmp_path):
    from ftenv.selfcheck import tinymodel

    base = tmp_path_factory.mktemp("stoprun")
    os.chmod(base, 0o755)
    tiny = tinymodel.build(base / "model")
    for p in base.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    out = base / "out"
    out.mkdir(mode=0o777)
    os.chmod(out, 0o777)  # the image's user (uid 1000) writes it
    name = f"ftenv-stop-{os.getpid()}"
    finetune = [
        "ftenv", "finetune", "--model-dir", str(tiny.root), "--train", str(tiny.train_jsonl),
        "--valid", str(tiny.val_jsonl), "--output-dir", str(out), "--gpus-per-node", "1", *CPU_RUN,
    ]  # fmt: skip
    podman = ["podman", "run", "--pull=never", "-e", "FTENV_FUNASR_CPU_SHIM=1", "-v", f"{base}:{base}"]
    log = tmp_path / "first.log"
    with log.open("wb") as f:
        first_run = [*podman, "--name", name, image, *finetune]
        proc = subprocess.Popen(first_run, stdout=f, stderr=subprocess.STDOUT)
        try:
            end = time.monotonic() + 600
            while "step_in_epoch: 3," not in log.read_text(errors="replace"):
                assert proc.poll() is None and time.monotonic() < end, log.read_text(errors="replace")[-4000:]
                time.sleep(0.1)
            subprocess.run(["podman", "stop", "-t", "60", name], check=True, capture_output=True, timeout=120)
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
            subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False)
    first = log.read_text(errors="replace")
    assert rc == 75, first[-4000:]
    m = re.search(r"ftenv finetune: stopped on SIGTERM at epoch 0 step (\d+) ", first)
    assert m, first[-4000:]
    step = int(m.group(1))
    assert (out / f"model.pt.ep0.{step}").is_file()
    again = subprocess.run([*podman, "--rm", image, *finetune], capture_output=True, text=True, timeout=900)
    second = again.stdout + again.stderr
    assert again.returncode == 0, second[-4000:]
    assert f"resuming from model.pt: epoch 0, step {step} (saved " in second
    assert re.search(rf"step_in_epoch: {step + 1},", second)
    assert not re.search(rf"step_in_epoch: {step},", second), "a batch trained twice"
