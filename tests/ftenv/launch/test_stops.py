"""How a run ends and who holds its folder: a restart (Slurm's SLURM_RESTART_COUNT) into a finished
folder ends with success on every node while a first start is refused; one run per output folder
(the lease: refused while its holder lives, taken over once it is gone, never taken by a dry run or
by node 1); and the closing barrier FunASR runs after its last save, bounded when a peer never comes.
The lease's rules are tested in-process; the two runs and the close on the tiny model (CPU).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ftenv import cli
from ftenv.launch.runlife import lease
from ftenv.outcome import UNUSABLE
from support.finetune_launch import cmdline

# The CPU runs of the tiny model, as the other run-life tests start them.
from tests.ftenv.launch.test_runlife import Run, _children, finetune_cmd, run_env, saved

FINISHED = "holds a finished run: model.pt: epoch 1, step 0"
SLURM_ONE_NODE = {
    "SLURM_JOB_ID": "4242", "SLURM_NODEID": "0", "SLURM_JOB_NUM_NODES": "1",
    "SLURM_JOB_NODELIST": "localhost",
}  # fmt: skip
SLURM_NODE_1_OF_2 = {
    "SLURM_JOB_ID": "4242", "SLURM_NODEID": "1", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_NODELIST": "localhost,other", "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
}  # fmt: skip


@pytest.fixture
def launcher_env(monkeypatch):
    """No launcher of this machine's own (Slurm, torchrun, Kubeflow) and no start-up report."""
    for key in [k for k in os.environ if k.startswith(("SLURM_", "PET_"))] + ["MASTER_ADDR", "WORLD_SIZE"]:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("FTENV_REPORT", "0")
    return monkeypatch


def finish(out: Path, epoch: int = 1) -> None:
    out.mkdir(exist_ok=True)
    torch.save({"epoch": epoch, "step": None, "state_dict": {}}, out / "model.pt")


def finetune(work: Path, *extra: str) -> int:
    return cli.main([*cmdline(work, "--gpus-per-node", "1", *extra), "++train_conf.max_epoch=1"])


@pytest.mark.parametrize("env", [SLURM_ONE_NODE, SLURM_NODE_1_OF_2], ids=["node-0", "node-1-of-2"])
def test_a_restart_into_a_finished_folder_ends_with_success(work, launcher_env, capsys, env):
    finish(work / "out")
    for k, v in env.items():
        launcher_env.setenv(k, v)
    # A first start: refused, as before (the user must choose).
    assert finetune(work) == UNUSABLE
    err = capsys.readouterr().err
    assert FINISHED in err and "--fresh" in err
    # The requeued job (same id, SLURM_RESTART_COUNT=1): done, exit 0, one line.
    launcher_env.setenv("SLURM_RESTART_COUNT", "1")
    assert finetune(work) == 0
    err = capsys.readouterr().err
    assert "ftenv finetune: the run finished at " in err and FINISHED not in err
    assert re.search(
        r"ftenv finetune: the run finished at \S+ \S+ UTC \(model.pt: the end of epoch 1 of 1\), nothing "
        r"left to do \(SLURM_RESTART_COUNT=1: this start is a restart of the job\)\n",
        err,
    ), err
    assert "running " not in err and not (work / "out" / lease.LEASE).exists()
    # SLURM_RESTART_COUNT=0 is a first start.
    launcher_env.setenv("SLURM_RESTART_COUNT", "0")
    assert finetune(work) == UNUSABLE and FINISHED in capsys.readouterr().err


# --- the lease, in-process ----------------------------------------------------------------------------


REQUEUED = "SLURM_RESTART_COUNT=1"


def holder(**changes) -> lease.Holder:
    h = lease.Holder.here("7", None, 30)
    for k, v in changes.items():
        setattr(h, k, v)
    return h


def write_lease(out: Path, h: lease.Holder) -> None:
    out.mkdir(exist_ok=True)
    (out / lease.LEASE).write_text(json.dumps(h.__dict__))


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def relative(old: dict) -> dict:
    """`renewed` given as seconds from now; `pid` "dead": one that has ended."""
    old = dict(old)
    if "renewed" in old:
        old["renewed"] += time.time()
    if old.get("pid") == "dead":
        old["pid"] = dead_pid()
    return old


def test_a_live_holder_refuses_and_names_itself(tmp_path):
    out = tmp_path / "out"
    first = lease.acquire(out, holder())
    with pytest.raises(lease.Refused) as refused:
        lease.acquire(out, holder(job_id="8"))
    text = str(refused.value)
    assert f"another run holds {out}: host {first.holder.host}, pid {os.getpid()}, job 7, since " in text
    assert "give another --output-dir" in text and f"remove {out / lease.LEASE}" in text
    first.release()
    assert not (out / lease.LEASE).exists()
    assert lease.acquire(out, holder(job_id="8")).line.endswith("(renewed every 30 s)")


@pytest.mark.parametrize(
    ("old", "me", "why"),
    [
        ({"pid": "dead"}, {}, "no longer runs on this host"),
        ({"host": "node9", "renewed": -200}, {}, "not renewed for 20"),
        ({"host": "node9", "job_id": "55"}, {"job_id": "55", "restart": REQUEUED}, "an earlier start"),
    ],
    ids=["same-host-dead-pid", "other-host-stale", "requeued-same-job"],
)
def test_a_gone_holder_is_taken_over_with_a_line(tmp_path, old, me, why):
    out = tmp_path / "out"
    write_lease(out, holder(**relative(old)))
    held = lease.acquire(out, holder(**me))
    assert "; took it over from host " in held.line and why in held.line
    assert json.loads((out / lease.LEASE).read_text())["token"] == held.holder.token


@pytest.mark.parametrize(
    "old",
    [{"host": "node9", "renewed": -60}, {"host": "node9", "job_id": "55"}],
    ids=["other-host-renewed-recently", "same-job-same-start"],
)
def test_a_holder_that_may_live_is_not_taken_over(tmp_path, old):
    out = tmp_path / "out"
    write_lease(out, holder(**relative(old)))
    with pytest.raises(lease.Refused, match="another run holds"):
        lease.acquire(out, holder(job_id="55"))


def test_the_renewer_renews_while_the_launcher_lives_and_releases_after(tmp_path):
    out = tmp_path / "out"
    script = (
        "import sys, time; from pathlib import Path; from ftenv.launch.runlife import lease\n"
        "h = lease.acquire(Path(sys.argv[1]), lease.Holder.here(None, None, 0.2)); h.keep_renewed()\n"
        "print(h.holder.renewed, flush=True); time.sleep(1.5)\n"
    )
    from support import child_env

    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(out)], stdout=subprocess.PIPE, text=True, env=child_env()
    )
    first = float(proc.stdout.readline())
    time.sleep(1.0)
    assert json.loads((out / lease.LEASE).read_text())["renewed"] > first + 0.3
    proc.wait(10)
    for _ in range(50):
        if not (out / lease.LEASE).exists():
            break
        time.sleep(0.1)
    assert not (out / lease.LEASE).exists(), "released once the launcher is gone"


def test_dry_run_and_node_1_do_not_take_the_folder(work, launcher_env, capsys):
    out = work / "out"
    write_lease(out, holder(host="node9"))
    before = (out / lease.LEASE).read_text()
    assert finetune(work, "--dry-run") == 0
    assert "(dry run) another run holds " in capsys.readouterr().err
    for k, v in SLURM_NODE_1_OF_2.items():
        launcher_env.setenv(k, v)
    assert finetune(work, "--dry-run") == 0
    assert (out / lease.LEASE).read_text() == before
    # Node 0 of the same job is refused before anything starts.
    launcher_env.setenv("SLURM_NODEID", "0")
    assert finetune(work) == UNUSABLE
    assert "another run holds" in capsys.readouterr().err and not list(out.glob("model.pt*"))


# --- on the tiny model, CPU ------------------------------------------------------------------------


def _tree(pid: int) -> list[int]:
    kids = _children(pid)
    return [pid, *(k for kid in kids for k in _tree(kid))]


@pytest.mark.slow
def test_a_second_run_into_a_live_folder_is_refused_and_takes_over_once_it_is_gone(tiny, tmp_path):
    out = tmp_path / "out"
    cmd = finetune_cmd(tiny, out)
    first = Run(cmd, tmp_path / "1.log")
    first.wait_for(r"step_in_epoch: 2,")
    rc, log2 = Run(finetune_cmd(tiny, out), tmp_path / "2.log").finish(timeout=120)
    assert rc == UNUSABLE, log2[-3000:]
    assert f"another run holds {out}: host " in log2 and f", pid {first.proc.pid}, since " in log2
    assert "train, rank" not in log2
    # The first run's machine is lost: every process of it killed at once (the lease stays behind).
    for pid in _tree(first.proc.pid):
        os.kill(pid, signal.SIGKILL)
    first.finish()
    assert (out / lease.LEASE).exists()
    third = Run(finetune_cmd(tiny, out), tmp_path / "3.log")
    pid = first.proc.pid
    third.wait_for(rf"took it over from host \S+, pid {pid}, since .*: pid {pid} no longer runs")
    third.wait_for(r"train, rank: 0, .*step_in_epoch: 1,")
    third.proc.send_signal(signal.SIGTERM)
    third.finish()


@pytest.mark.slow
def test_a_close_that_never_returns_ends_the_run_within_the_bound(tiny, tmp_path):
    """Rank 1 never reaches FunASR's closing barrier (planted): rank 0 waits in it; both end after
    FTENV_CLOSE_TIMEOUT_S with exit 0, every checkpoint in place."""
    out = tmp_path / "out"
    env = run_env(FTENV_TEST_CLOSE_HANG_RANK="1", FTENV_CLOSE_TIMEOUT_S="5", FTENV_COLLECTIVE_TIMEOUT_S="120")
    run = Run(finetune_cmd(tiny, out, "++backend=gloo", gpus=2), tmp_path / "run.log", env=env)
    run.wait_for(r"average_checkpoints", timeout=300)
    averaged = time.monotonic()
    rc, log = run.finish(timeout=90)
    assert rc == 0, log[-3000:]
    assert time.monotonic() - averaged < 60, "the bound (5 s) and the exit, not the collective timeout"
    for rank in (0, 1):
        assert "did not return in 5 s (FTENV_CLOSE_TIMEOUT_S): training is over and the " in log
        assert f"; rank {rank} ends here (exit 0)" in log, log[-3000:]
    assert saved(out / "model.pt")["epoch"] == 1 and saved(out / "model.pt.ep1")["epoch"] == 1
    assert list(out.glob("model.pt.avg*")), sorted(p.name for p in out.iterdir())
