"""A real Slurm on this machine runs the pyxis sbatch example through `ftenv finetune`, two nodes of
one CPU rank each, on the tiny Fun-ASR-Nano, until its checkpoint is written.

The test starts munged, slurmctld and two slurmd (Debian's slurm-wlm runs several slurmd on one
host: two Slurm nodes, node 0 named after this host so that it resolves as the master), submits
docs/examples/slurm/finetune-pyxis.sbatch with `sbatch --wait`, and stops every daemon by its PID.
What differs from a GPU cluster, and why:
- no pyxis/enroot here (not in Debian): the `--container-*` options are removed from the srun line
  and the job runs the host's ftenv, torch and funasr (the image's locked stack, in the venv);
- no GPUs: the `#SBATCH --gpus-per-node` line is removed, GPUS_PER_NODE=1, and the trainer is
  `python -m ftenv.trainer.funasr_entry` with FTENV_FUNASR_CPU_SHIM=1, which runs the real
  funasr-train-ds after mapping its hard-coded CUDA calls to the CPU (ftenv/trainer/funasr_cpu_shim.py),
  with `++device=cpu ++backend=gloo` (NCCL needs GPUs).
The cluster also has a partition of higher PriorityTier with PreemptMode=REQUEUE, whose jobs preempt
the example's (a real preemption). Everything else is the example as users copy it: sbatch, one
srun task per node, ftenv finetune printing the start-up report on each node and reading SLURM_*
(node rank, node count, first host as master), torchrun per node, DDP across the two nodes, the
recipe's overrides, the watchdog, checkpoints in OUT_DIR, the stop on a signal and the requeue.
Needs root and `slurm-wlm munge` (installed by `make engine`, part of `make test`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ftenv import variables
from ftenv.data.sets import FILE_NAMES
from support import ROOT, child_env
from support.trained_steps import epoch_length, steps_of

#: Every test needs the one-machine Slurm cluster; most train the tiny model under it (tens of seconds).
pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "docs/examples/slurm/finetune-pyxis.sbatch"
#: This cluster's credential lifetime (AuthInfo=cred_expire, 120 s by default), which is also how
#: long Slurm holds a requeued job: its new launch credential must be newer than the revocation of
#: the old one (Slurm 22.05's job_mgr.c, the requeue's begin_time). The requeue tests wait out this
#: shortened hold; moving the job's StartTime to now instead let it start within the second of the
#: revocation, and slurmctld killed it ("Job credential revoked", the job FAILED 1:0).
CRED_EXPIRE_S = 10
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _missing() -> str | None:
    if os.getuid() != 0:
        return "needs root (munged runs as the munge user, slurmd as root)"
    absent = [d for d in DAEMONS if not (shutil.which(d) or Path(f"/usr/sbin/{d}").exists())]
    if absent:
        return f"{', '.join(absent)} not installed: run `make engine` (apt: slurm-wlm munge)"
    return None


def _exe(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class Cluster:
    """Two Slurm nodes on this host, in a temporary folder; stop() ends what start() began."""

    def __init__(self, base: Path):
        self.base = base
        self.pids: list[int] = []
        self.host = socket.gethostname().split(".")[0]
        # Slurm lists nodes sorted by name: the second must sort after this host to keep it first.
        self.other = "zzz-ftenv-node2"
        self.conf = base / "slurm.conf"
        self.env = child_env(SLURM_CONF=str(self.conf))

    def start(self) -> None:
        b = self.base
        for d in ("state", "spool", "log", "munge", "msock"):
            (b / d).mkdir(parents=True, exist_ok=True)
        os.chmod(b, 0o755)
        (b / "munge/key").write_bytes(os.urandom(128))  # this cluster's own key
        shutil.chown(b / "munge", "munge", "munge")
        shutil.chown(b / "munge/key", "munge", "munge")
        shutil.chown(b / "msock", "munge", "munge")
        os.chmod(b / "munge", 0o700)
        os.chmod(b / "munge/key", 0o400)
        os.chmod(b / "msock", 0o755)
        sock = b / "msock/sock"
        subprocess.run(
            ["runuser", "-u", "munge", "--", _exe("munged"), f"--socket={sock}", f"--key-file={b}/munge/key",
             f"--pid-file={b}/munge/pid", f"--log-file={b}/munge/log", f"--seed-file={b}/munge/seed"],
            check=True,
        )  # fmt: skip
        self.pids.append(self._pid(b / "munge/pid"))
        ctld, d1, d2 = _free_port(), _free_port(), _free_port()
        self.conf.write_text(
            f"""ClusterName=ftenvtest
SlurmctldHost={self.host}(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket={sock},cred_expire={CRED_EXPIRE_S}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool/%n
SlurmctldPidFile={b}/slurmctld.pid
SlurmdPidFile={b}/slurmd-%n.pid
SlurmctldLogFile={b}/log/slurmctld.log
SlurmdLogFile={b}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName={self.host} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={d1} CPUs=2 State=UNKNOWN
NodeName={self.other} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={d2} CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={self.host},{self.other} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=urgent Nodes={self.host},{self.other} PriorityTier=10 MaxTime=INFINITE State=UP
"""
        )
        subprocess.run([_exe("slurmctld"), "-f", str(self.conf), "-i"], check=True, env=self.env)
        self.pids.append(self._pid(b / "slurmctld.pid"))
        for node in (self.host, self.other):
            subprocess.run([_exe("slurmd"), "-f", str(self.conf), "-N", node], check=True, env=self.env)
            self.pids.append(self._pid(b / f"slurmd-{node}.pid"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%T %D"], capture_output=True, text=True, env=self.env
            ).stdout.split()
            if out[:2] == ["idle", "2"]:
                return
            time.sleep(1)
        raise RuntimeError(f"Slurm nodes not idle after 60 s: {out}\n{self.logs()}")

    @staticmethod
    def _pid(path: Path) -> int:
        for _ in range(50):
            if path.is_file() and path.read_text().strip():
                return int(path.read_text().strip())
            time.sleep(0.1)
        raise RuntimeError(f"no pid file {path}")

    def logs(self) -> str:
        return "\n".join(
            f"== {p.name}\n{p.read_text()[-3000:]}" for p in sorted((self.base / "log").glob("*"))
        )

    def stop(self) -> None:
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if reason := _missing():
        pytest.skip(reason)
    host = socket.gethostname().split(".")[0]
    try:
        socket.gethostbyname(host)
    except OSError:
        pytest.skip(f"this host's name {host!r} does not resolve: torchrun could not reach it as master")
    c = Cluster(Path("/tmp") / f"ftenv-slurm-{os.getpid()}")
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(c.base, ignore_errors=True)


@pytest.fixture(scope="module")
def tiny(tiny):
    """The tiny model built once for the whole run (tests/conftest.py), as its paths."""
    from ftenv.selfcheck import tinymodel

    return tinymodel.paths(tiny)


def runnable_example(text: str, batch_size: int = 400) -> str:
    """The pyxis example minus what this machine lacks (pyxis, GPUs), plus the CPU run's overrides
    (its trainer is the image's own entry, with FTENV_FUNASR_CPU_SHIM set by the job's environment)."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#SBATCH --gpus-per-node"):
            continue
        if stripped.startswith(("--container-", "--no-container-")):
            continue
        lines.append(line)
    script = "\n".join(lines)
    # The CPU run's overrides follow the example's own (Hydra: the later value wins).
    script = script.replace(
        "++train_conf.max_epoch=5",
        "++train_conf.max_epoch=5 ++train_conf.max_epoch=1 ++device=cpu ++backend=gloo "
        f"++dataset_conf.batch_size={batch_size} ++dataset_conf.num_workers=0",
    )
    assert "--container-image" not in script and "++backend=gloo" in script
    return script + "\n"


def job_env(cluster: Cluster, tiny, out_dir: Path, data_dir: Path | None = None) -> dict[str, str]:
    """The job's environment: the example's paths on the tiny model, one CPU rank per node."""
    return {
        **cluster.env,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "MODEL_DIR": str(tiny.root),
        "DATA_DIR": str(data_dir or tiny.train_jsonl.parent),
        "OUT_DIR": str(out_dir),
        "GPUS_PER_NODE": "1",
        "MASTER_PORT": str(_free_port()),
        "OMP_NUM_THREADS": "1",
        variables.FUNASR_CPU_SHIM: "1",
        # The job runs in its own folder: this checkout's ftenv by its absolute path.
        "PYTHONPATH": str(Path(variables.__file__).resolve().parents[1]),
    }


def test_multi_node_launch_in_the_batch_script_is_refused(cluster, tiny, tmp_path):
    """Run without srun, ftenv finetune would start on the first node only: it says so instead."""
    script = tmp_path / "wrong.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"
        f"ftenv finetune --dry-run --model-dir {tiny.root} --train {tiny.train_jsonl} "
        f"--valid {tiny.val_jsonl} --output-dir {tmp_path}/out --gpus-per-node 1\n"
    )
    env = {**cluster.env, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        ["sbatch", "--wait", "--output", str(tmp_path / "wrong.out"), str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    log = (tmp_path / "wrong.out").read_text()
    assert proc.returncode != 0, log
    assert "this Slurm job has 2 nodes but `ftenv finetune` runs in the batch script itself" in log, log


def job_state(cluster: Cluster, job: str) -> dict[str, str]:
    """`scontrol show job` as a dict (JobState, Restarts, ExitCode, ...)."""
    out = subprocess.run(
        ["scontrol", "-o", "show", "job", job], capture_output=True, text=True, env=cluster.env
    ).stdout
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


#: How many times the stop tests repeat the tiny training set (new keys, the same audio): one step
#: per utterance, so the epoch lasts long enough (seconds) for a stop sent after step 2 to land in
#: it; with the tiny set alone (24 steps a rank, a few seconds) a preemption, which Slurm delivers
#: seconds after the preempting job's submission, came after the run's last save.
EPOCH_REPEATS = 6


def longer_epoch(tiny, folder: Path, repeats: int = EPOCH_REPEATS) -> Path:
    """A data folder whose train.jsonl is the tiny model's repeated `repeats` times, valid.jsonl as is."""
    folder.mkdir()
    lines = tiny.train_jsonl.read_text(encoding="utf-8").splitlines()
    repeated = []
    for k in range(repeats):
        for line in lines:
            record = json.loads(line)
            record["key"] = f"{record['key']}-{k}"
            repeated.append(json.dumps(record, ensure_ascii=False))
    (folder / FILE_NAMES["train"]).write_text("\n".join(repeated) + "\n", encoding="utf-8")
    shutil.copyfile(tiny.val_jsonl, folder / FILE_NAMES["valid"])
    return folder


#: How the job is stopped mid-epoch: the signal before the time limit (`--signal=USR1@300` sends it
#: to every process of the job's steps, as `scancel --signal=USR1` does), and a real preemption (a job
#: of a partition with a higher PriorityTier needs the nodes; PreemptMode=REQUEUE: Slurm sends SIGTERM
#: to the steps, then to the batch step and srun, SIGKILL KillWait later, and requeues the job).
STOPS = {
    "USR1-before-the-time-limit": (["scancel", "--signal=USR1"], "SIGUSR1"),
    "preempted-PreemptMode-REQUEUE": (
        ["sbatch", "-p", "urgent", "--nodes=2", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 1"],
        "SIGTERM",
    ),
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_stopped_job_is_requeued_resumes_and_completes(cluster, tiny, tmp_path, stop):
    """The example stopped mid-epoch on both nodes at once (Slurm signals every process of the steps:
    the watchdog, torchrun and the ranks, and the watchdog forwards it again): the job ends requeued
    (same id), the requeued job resumes where the stop saved, and it completes with exit 0:0; each
    step of the epoch trained once on each rank, across the stop. The same job shows the example
    runs as users copy it (a job of its own did that before, and trained the tiny model once more):
    the start-up report and Slurm's variables read on each node at each start, DDP across the two
    nodes, the checkpoints."""
    how, signal_name = STOPS[stop]
    script = tmp_path / "job.sbatch"
    script.write_text(runnable_example(EXAMPLE.read_text(), batch_size=150))
    out_dir = tmp_path / "run"
    env = job_env(cluster, tiny, out_dir, data_dir=longer_epoch(tiny, tmp_path / "data"))
    log = tmp_path / "job.out"
    job = subprocess.run(
        ["sbatch", "--parsable", "--output", str(log), str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=True,
    ).stdout.strip().split(";")[0]  # fmt: skip
    started = time.monotonic()

    def text() -> str:
        return log.read_text(errors="replace") if log.exists() else ""

    def wait(what, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if what():
                return
            time.sleep(0.5)
        subprocess.run(["scancel", job], env=cluster.env)
        pytest.fail(f"timed out; job {job_state(cluster, job)}\n{text()[-6000:]}\n{cluster.logs()[-3000:]}")

    # Mid-epoch: both ranks past their second step.
    wait(lambda: all(len(steps_of(text(), r)) >= 2 for r in (0, 1)), 240)
    subprocess.run([*how, *([job] if how[0] == "scancel" else [])], env=cluster.env, check=True)
    wait(lambda: job_state(cluster, job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED"), 300)
    state, logs = job_state(cluster, job), text()
    tail = f"{state}\n{logs[-8000:]}\n{cluster.logs()[-4000:]}"
    assert (state["JobState"], state["ExitCode"], state["Restarts"]) == ("COMPLETED", "0:0", "1"), tail
    saved = re.search(r"stopped on (SIG\w+) at epoch 0 step (\d+)", logs)
    assert saved and f"resuming from model.pt: epoch 0, step {saved.group(2)} (saved " in logs, tail
    assert saved.group(1) == signal_name, tail
    n = epoch_length(logs)
    assert 0 < int(saved.group(2)) < n, tail  # mid-epoch
    for rank in (0, 1):
        assert steps_of(logs, rank) == list(range(1, n + 1)), (rank, tail)
    # Every node stopped cleanly: no task was ended from outside.
    assert logs.count("(exit 75)") == 2 and "FAILED" not in logs, tail
    # pyxis skips the image's entrypoint: ftenv finetune prints the start-up report, once per node
    # and start; each read Slurm's variables and agreed on the master; both global ranks trained.
    assert logs.count("== ftenv report:") == 4, tail
    for rank in (0, 1):
        assert f"launch: slurm: node {rank} of 2, master {cluster.host}:{env['MASTER_PORT']}" in logs, tail
        assert re.search(rf"train, rank: {rank}, epoch: 0/1", logs), tail
    assert (out_dir / "model.pt").is_file() and (out_dir / "model.pt.ep1").is_file(), sorted(
        p.name for p in out_dir.glob("*")
    )
    print(f"stop, requeue and resume under Slurm: {time.monotonic() - started:.0f} s")


def test_a_job_preempted_after_its_last_save_ends_completed(cluster, tiny, tmp_path):
    """A preemption after the run's last save and average_checkpoints: Slurm requeues the job, and the
    requeued start (SLURM_RESTART_COUNT=1) finds the run finished, says so on both nodes and exits 0:
    the job ends COMPLETED 0:0, the model as the first start left it. To land the preemption there
    every time, rank 1 is held before FunASR's closing barrier (the test aid of
    ftenv.trainer.runlife.hooks, with a bound longer than the test), so both ranks wait in it."""
    script = tmp_path / "job.sbatch"
    script.write_text(runnable_example(EXAMPLE.read_text()))
    out_dir = tmp_path / "run"
    env = {
        **job_env(cluster, tiny, out_dir),
        variables.TEST_CLOSE_HANG_RANK: "1",
        variables.CLOSE_TIMEOUT_S: "900",
    }
    log = tmp_path / "job.out"
    job = subprocess.run(
        ["sbatch", "--parsable", "--output", str(log), str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=True,
    ).stdout.strip().split(";")[0]  # fmt: skip

    def text() -> str:
        return log.read_text(errors="replace") if log.exists() else ""

    def wait(what, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if what():
                return
            time.sleep(0.5)
        subprocess.run(["scancel", job], env=cluster.env)
        pytest.fail(f"timed out; job {job_state(cluster, job)}\n{text()[-6000:]}\n{cluster.logs()[-3000:]}")

    wait(lambda: "average_checkpoints" in text(), 300)
    time.sleep(2)  # rank 0 past the averaging, into the barrier
    averaged = {p.name: p.stat().st_mtime_ns for p in out_dir.glob("model.pt*")}
    preempt, _ = STOPS["preempted-PreemptMode-REQUEUE"]
    subprocess.run(preempt, env=cluster.env, check=True)
    wait(lambda: job_state(cluster, job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED"), 400)
    state, logs = job_state(cluster, job), text()
    tail = f"{state}\n{logs[-8000:]}\n{cluster.logs()[-4000:]}"
    assert (state["JobState"], state["ExitCode"], state["Restarts"]) == ("COMPLETED", "0:0", "1"), tail
    done = "nothing left to do (SLURM_RESTART_COUNT=1: this start is a restart of the job)"
    assert logs.count(done) == 2 and "holds a finished run" not in logs, tail
    assert "the end of epoch 1 of 1" in logs and "running " in logs.split(done)[0], tail
    # The requeued job trained nothing and changed no checkpoint.
    assert {p.name: p.stat().st_mtime_ns for p in out_dir.glob("model.pt*")} == averaged, tail
    assert any(".avg" in name for name in averaged), sorted(averaged)
