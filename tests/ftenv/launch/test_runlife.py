"""A run's life on the real trainer (`ftenv finetune` on the tiny model, CPU): a signal stops it at
a step boundary with a checkpoint of exactly where it was (exit 75), the same command continues it
(each remaining batch of the epoch once, however many stops), a cut model.pt falls back to the
newest checkpoint that loads, a finished folder is refused (exit 2, naming the way out), two ranks
stop at the same step when only one is signalled, and a full disk gives a clear error and no cut
file. The folder reading and the atomic save are also tested on their own, in-process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ftenv.launch.runlife import folder, space
from ftenv.outcome import STOPPED, UNUSABLE
from ftenv.selfcheck import tinymodel
from ftenv.trainer.funasr_cpu_shim import CPU_OVERRIDES
from ftenv.trainer.runlife import atomic
from support import child_env
from support.trained_steps import epoch_length, steps_of

CPU_RUN = (*CPU_OVERRIDES, "++train_conf.max_epoch=1", "++dataset_conf.batch_size=300")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def finetune_cmd(tiny: Path, out: Path, *extra: str, gpus: int = 1) -> list[str]:
    """The command, on a free port (tests may run side by side); rerun it as is to resume."""
    p = tinymodel.paths(tiny)
    return [
        sys.executable, "-m", "ftenv.cli", "finetune", "--model-dir", str(p.root),
        "--train", str(p.train_jsonl), "--valid", str(p.val_jsonl), "--output-dir", str(out),
        "--gpus-per-node", str(gpus), "--master-port", str(free_port()), *CPU_RUN, *extra,
    ]  # fmt: skip


def run_env(**extra: str) -> dict[str, str]:
    return child_env(FTENV_FUNASR_CPU_SHIM="1", FTENV_REPORT="0", OMP_NUM_THREADS="1", **extra)


class Run:
    """`ftenv finetune` in the background, its output in a file that can be waited on."""

    def __init__(self, cmd: list[str], log: Path, env: dict | None = None):
        self.log = log
        self.file = log.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self.file, stderr=subprocess.STDOUT, env=env or run_env())

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 300) -> re.Match:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, self.text())
            if m:
                return m
            if self.proc.poll() is not None:
                pytest.fail(f"exited {self.proc.returncode} before {pattern!r}:\n{self.text()[-3000:]}")
            time.sleep(0.05)
        self.proc.kill()
        pytest.fail(f"no {pattern!r} in {timeout} s:\n{self.text()[-3000:]}")

    def finish(self, timeout: float = 300) -> tuple[int, str]:
        try:
            rc = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.file.close()
        return rc, self.text()


def saved(path: Path) -> dict:
    data = torch.load(path, map_location="cpu", mmap=True)
    return {"epoch": data["epoch"], "step": data["step"], "step_in_epoch": data["step_in_epoch"]}


@pytest.mark.slow
def test_stop_resume_cut_file_and_finished_folder(tiny, tmp_path):
    """SIGTERM mid-epoch, then the same command: resumed at the step reached. model.pt cut in half:
    the rerun goes on from model.pt.ep0.S. A second stop (SIGUSR1, Slurm's --signal) in the same
    epoch saves the step from the epoch's start. The last rerun trains each remaining batch once
    and finishes; one more rerun is refused with exit 2 naming --fresh."""
    out = tmp_path / "out"
    cmd = finetune_cmd(tiny, out)
    # 1. SIGTERM after step 3 is logged: the run stops at the next boundary, saved.
    first = Run(cmd, tmp_path / "1.log")
    first.wait_for(r"step_in_epoch: 3,")
    first.proc.send_signal(signal.SIGTERM)
    rc, log1 = first.finish()
    assert rc == STOPPED, log1[-3000:]
    done1 = steps_of(log1)
    s1 = done1[-1]
    assert done1 == list(range(1, s1 + 1)), done1
    n = epoch_length(log1)
    assert s1 < n, "the stop must land mid-epoch for this test"
    line = f"stopped on SIGTERM at epoch 0 step {s1} (batches done in that epoch); saved to {out}/model.pt"
    assert line in log1 and "run the same command again to continue" in log1
    assert saved(out / "model.pt") == {"epoch": 0, "step": s1, "step_in_epoch": s1}
    assert saved(out / f"model.pt.ep0.{s1}") == saved(out / "model.pt")
    record = json.loads((out / "ftenv-stop.json").read_text())
    assert (record["signal"], record["epoch"], record["step"]) == ("SIGTERM", 0, s1)

    # 2. model.pt cut in half: the rerun says so and goes on from the epoch file; a SIGUSR1 stops it.
    whole = (out / "model.pt").read_bytes()
    (out / "model.pt").write_bytes(whole[: len(whole) // 2])
    second = Run(cmd, tmp_path / "2.log")
    second.wait_for(rf"step_in_epoch: {s1 + 2},")
    second.proc.send_signal(signal.SIGUSR1)
    rc, log2 = second.finish()
    assert rc == STOPPED, log2[-3000:]
    assert "model.pt does not load (" in log2
    assert f"resuming from model.pt.ep0.{s1}: epoch 0, step {s1} (saved " in log2
    assert len(list(out.glob("model.pt.unreadable-*"))) == 1
    done2 = steps_of(log2)
    s2 = done2[-1]
    assert done2 == list(range(s1 + 1, s2 + 1)), (s1, done2)
    # The step saved counts from the epoch's start, not from where this process began (FunASR: s2 - s1).
    assert saved(out / "model.pt") == {"epoch": 0, "step": s2, "step_in_epoch": s2}
    assert f"stopped on SIGUSR1 at epoch 0 step {s2}" in log2

    # 3. The same command again: each remaining batch once, then the run finishes.
    rc, log3 = Run(cmd, tmp_path / "3.log").finish(timeout=600)
    assert rc == 0, log3[-3000:]
    assert f"resuming from model.pt: epoch 0, step {s2} (saved " in log3
    assert steps_of(log3) == list(range(s2 + 1, n + 1))
    assert f"dataloader start from step: {s2}" in log3  # FunASR's sampler skipped exactly those
    assert saved(out / "model.pt") == {"epoch": 1, "step": None, "step_in_epoch": None}

    # 4. Once more: a finished run is refused, naming the ways out.
    rc, log4 = Run(cmd, tmp_path / "4.log").finish()
    assert rc == UNUSABLE, log4[-3000:]
    assert "holds a finished run: model.pt: epoch 1, step 0" in log4
    for way_out in ("++train_conf.max_epoch=N, N > 1", "--fresh", "another --output-dir"):
        assert way_out in log4
    assert "train, rank" not in log4


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _rank_of(pid: int) -> int:
    env = dict(e.split(b"=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in e)
    return int(env[b"RANK"])


@pytest.mark.slow
def test_two_ranks_stop_at_the_same_step_when_one_is_signalled(tiny, tmp_path):
    """gloo on the CPU, two ranks; SIGUSR1 to rank 1's process only: both stop at one step."""
    out = tmp_path / "out"
    run = Run(finetune_cmd(tiny, out, "++backend=gloo", gpus=2), tmp_path / "run.log")
    run.wait_for(r"train, rank: 1, .*step_in_epoch: 2,")
    torchrun = _children(run.proc.pid)
    workers = [w for t in torchrun for w in _children(t)]
    ranks = {_rank_of(w): w for w in workers}
    os.kill(ranks[1], signal.SIGUSR1)
    rc, log = run.finish()
    assert rc == STOPPED, log[-3000:]
    last = {r: steps_of(log, r)[-1] for r in (0, 1)}
    assert last[0] == last[1], last
    assert saved(out / "model.pt")["step"] == last[0]
    assert f"stopped on SIGUSR1 at epoch 0 step {last[0]}" in log


# --- a full disk (a small tmpfs; needs root) ------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of a given size in MB, unmounted afterwards."""
    mounted = []

    def make(size_mb: int) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        mount = ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)]
        proc = subprocess.run(mount, capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (root needed): {proc.stderr.strip()}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_too_little_space_is_refused_before_launch_with_the_numbers(tiny, small_disk, tmp_path):
    out = small_disk(20) / "out"
    rc, log = Run(finetune_cmd(tiny, out), tmp_path / "run.log").finish()
    assert rc == UNUSABLE, log[-3000:]
    assert "not enough space for this run's checkpoints: 24 checkpoints (20 kept by keep_nbest_models" in log
    assert re.search(r"has \d+\.\d+ GB free", log) and "++train_conf.keep_nbest_models=N" in log
    assert "train, rank" not in log and not list(out.glob("model.pt*"))


@pytest.mark.slow
def test_a_disk_that_fills_during_the_run_leaves_no_cut_file(tiny, small_disk, tmp_path):
    """The check passes (1 kept checkpoint), but a checkpoint every 2 steps that no validation ranks
    (FunASR keeps those on disk) fills the 56 MB: the save that does not fit fails with a clear
    message, and every checkpoint under a final name still loads."""
    out = small_disk(56) / "out"
    cmd = finetune_cmd(
        tiny, out, "++train_conf.keep_nbest_models=1", "++train_conf.save_checkpoint_interval=2"
    )
    rc, log = Run(cmd, tmp_path / "run.log").finish()
    assert rc not in (0, STOPPED), log[-3000:]
    assert re.search(r"checkpoint \S+ not written: the disk is full \(", log), log[-3000:]
    assert "The file under that name is unchanged (the partial copy was removed)" in log
    files = sorted(out.glob("model.pt*"))
    assert len(files) >= 3, files
    for f in files:
        assert isinstance(folder.read_checkpoint(f), folder.Checkpoint), f
    assert not list(out.glob(".*.tmp-*"))


# --- the pieces, in-process -----------------------------------------------------------------------


def _ckpt(path: Path, epoch: int, step: int | None) -> Path:
    torch.save({"epoch": epoch, "step": step, "state_dict": {"w": torch.zeros(4)}}, path)
    return path


def test_folder_states(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert folder.inspect(out, max_epoch=2).kind == "fresh"
    _ckpt(out / "model.pt.ep1", 1, None)
    _ckpt(out / "model.pt.ep1.7", 1, 7)
    latest = _ckpt(out / "model.pt", 1, 7)
    state = folder.inspect(out, max_epoch=2)
    assert (state.kind, state.checkpoint.epoch, state.checkpoint.step) == ("resume", 1, 7)
    assert state.line.startswith("resuming from model.pt: epoch 1, step 7 (saved ")
    # Cut in half: the newest epoch file that loads becomes model.pt (a link), the cut one kept aside.
    latest.write_bytes(latest.read_bytes()[:200])
    (out / ".model.pt.tmp-123").write_bytes(b"partial")
    state = folder.inspect(out, max_epoch=2)
    assert state.kind == "resume" and state.relink.path.name == "model.pt.ep1.7"
    assert (
        state.line.startswith("model.pt does not load (")
        and "resuming from model.pt.ep1.7: epoch 1, step 7" in state.line
    )
    notes = folder.prepare(out, state)
    assert notes == ["removed .model.pt.tmp-123, left by a save that was cut short"]
    assert os.path.samefile(out / "model.pt", out / "model.pt.ep1.7")
    assert len(list(out.glob("model.pt.unreadable-*"))) == 1
    # The end of the last epoch: finished, unless more epochs are asked for.
    _ckpt(out / "model.pt", 2, None)
    assert folder.inspect(out, max_epoch=2).kind == "finished"
    assert folder.inspect(out, max_epoch=3).kind == "resume"
    assert folder.inspect(out, max_epoch=2, resume=False).kind == "fresh"
    # Nothing loads: refused, naming --fresh; --fresh moves the files away.
    for f in out.glob("model.pt*"):
        f.write_bytes(b"cut")
    state = folder.inspect(out, max_epoch=2)
    assert state.kind == "broken" and "--fresh" in state.line
    assert folder.start_over(out).startswith("--fresh: ")
    assert folder.inspect(out, max_epoch=2).kind == "fresh"


def test_atomic_save_keeps_the_old_file_when_a_save_fails(tmp_path):
    path = tmp_path / "model.pt"
    atomic.save_atomically(torch.save, {"v": 1}, path)
    assert torch.load(path)["v"] == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]

    def fills_the_disk(obj, f, *args, **kwargs):
        Path(f).write_bytes(b"x" * 1000)
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    with pytest.raises(
        atomic.CheckpointWriteError, match=r"checkpoint .*model.pt not written: the write failed"
    ):
        atomic.save_atomically(fills_the_disk, {"v": 2}, path)
    assert torch.load(path)["v"] == 1, "the old file is intact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"], "no temporary file left"
    # A file object passes through untouched.
    with open(tmp_path / "plain.pt", "wb") as f:
        atomic.save_atomically(torch.save, {"v": 3}, f)
    assert torch.load(tmp_path / "plain.pt")["v"] == 3


def test_space_check_numbers(tmp_path):
    model_pt = tmp_path / "model.pt"
    model_pt.write_bytes(b"0" * 1000)
    refusal, _ = space.check(
        tmp_path / "out", model_pt, keep=20, max_epoch=5, existing=None, environ={"FTENV_SPACE_CHECK": "1"}
    )
    assert refusal is None  # 24 x 4 kB fits anywhere
    huge = 10**18
    big = tmp_path / "big.pt"
    with open(big, "wb") as f:
        f.truncate(huge // 10**6)  # a sparse 1 TB "checkpoint"
    refusal, _ = space.check(tmp_path / "out", model_pt, 20, 5, existing=big, environ={})
    assert (
        refusal is not None
        and "24 checkpoints" in refusal
        and "x 1000.000 GB (the size of big.pt)" in refusal
    )
    assert space.check(tmp_path / "out", model_pt, 20, 5, big, environ={"FTENV_SPACE_CHECK": "0"})[0] is None


@pytest.mark.slow
def test_a_rank_that_dies_ends_the_job_as_a_crash(tiny, tmp_path):
    """SIGKILL to rank 1 (a node lost): torchrun ends the job with a crash's exit code, not the stop's,
    and with torchrun's own 30 s for the survivors (the longer wait is only for a signal torchrun got)."""
    run = Run(finetune_cmd(tiny, tmp_path / "out", "++backend=gloo", gpus=2), tmp_path / "run.log")
    run.wait_for(r"train, rank: 1, .*step_in_epoch: 2,")
    workers = [w for t in _children(run.proc.pid) for w in _children(t)]
    killed = time.monotonic()
    os.kill({_rank_of(w): w for w in workers}[1], signal.SIGKILL)
    rc, log = run.finish(timeout=120)
    assert rc not in (0, STOPPED), log[-3000:]
    assert "exitcode: -9" in log and "stopped on" not in log
    assert time.monotonic() - killed < 60, "torchrun's 30 s at most, plus the exit"
