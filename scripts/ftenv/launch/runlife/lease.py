"""One run per output folder: the launcher of node 0 holds a lease file in the folder, renewed while
it runs, so that a second `ftenv finetune` into it is refused before anything starts, and a run
that is gone is taken over.

Why a lease file and not flock: the folders live on NFS or Lustre, shared by the nodes; flock there
is emulated with NFS byte-range locks (Linux nfs(5), `local_lock`) or depends on Lustre's `flock`
mount option, and a lock held by a node that died is freed only when the server notices. A file
that says who holds it (host, pid, job id, since when) and when it was last renewed works on any
filesystem that renames atomically, and its refusal can name the holder.

- Taking it: the lease is written under a temporary name and hard-linked to `.ftenv-lease.json`;
  link(2) fails when the name exists, atomically also over NFS (the lock-file recipe of open(2),
  O_EXCL). Without hard links (some FUSE filesystems) it is created with O_EXCL.
- Renewing it: a small process started by the launcher rewrites `renewed` every
  FTENV_LEASE_RENEW_S seconds (temporary file, rename) while the launcher's process lives (it
  becomes `ftenv watch` by exec: the same pid), and removes the lease when it has gone.
- Gone: the same machine (host name, boot id and pid namespace) and the pid no longer runs (or
  runs another program): at once. The same Slurm job id with another SLURM_RESTART_COUNT: at once
  (a requeued job takes over its own lease; Slurm never runs two starts of one job). Otherwise when
  it was not renewed for STALE_RENEWALS renewals, by the holder's clock against ours: the nodes'
  clocks must agree to well within that (Slurm's munge credentials need it already).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from ftenv import variables

LEASE = ".ftenv-lease.json"
#: A lease not renewed for this many renewal periods is stale: its holder is gone.
STALE_RENEWALS = 4


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """The process's start time (field 22 of /proc/PID/stat): a reused pid has another one."""
    stat = _read_text(f"/proc/{pid}/stat")
    return stat.rsplit(")", 1)[-1].split()[19] if ")" in stat else ""


def _pid_ns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass
class Holder:
    """Who holds (or asks for) the lease, as written in the file."""

    host: str
    pid: int
    job_id: str | None
    restart: str | None
    since: str
    renewed: float
    every_s: float
    token: str
    boot_id: str = ""
    pid_ns: str = ""
    start_ticks: str = ""

    @classmethod
    def here(cls, job_id: str | None, restart: str | None, every_s: float) -> Holder:
        now = time.time()
        return cls(
            host=socket.gethostname(),
            pid=os.getpid(),
            job_id=job_id,
            restart=restart,
            since=datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            renewed=now,
            every_s=every_s,
            token=uuid.uuid4().hex,
            boot_id=_read_text("/proc/sys/kernel/random/boot_id"),
            pid_ns=_pid_ns(),
            start_ticks=_start_ticks(os.getpid()),
        )

    def describe(self) -> str:
        job = f", job {self.job_id}" if self.job_id else ""
        return f"host {self.host}, pid {self.pid}{job}, since {self.since}"

    def gone(self, me: Holder, now: float) -> str | None:
        """Why this holder is gone (None: it may be alive)."""
        if self.job_id and self.job_id == me.job_id and self.restart != me.restart:
            return f"an earlier start of this job ({self.restart or 'its first'}, now {me.restart})"
        if (self.host, self.boot_id, self.pid_ns) == (me.host, me.boot_id, me.pid_ns) and self.boot_id:
            ticks = _start_ticks(self.pid)
            if not ticks or ticks != self.start_ticks:
                return f"pid {self.pid} no longer runs on this host"
            return None
        silent = now - self.renewed
        if silent > STALE_RENEWALS * self.every_s:
            return f"not renewed for {silent:.0f} s (every {self.every_s:g} s expected)"
        return None


def _read(path: Path) -> Holder | None:
    try:
        return Holder(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _write_temp(path: Path, holder: Holder) -> Path:
    tmp = path.with_name(f".{path.name}.tmp-{holder.token}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(asdict(holder), f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    return tmp


def _create(path: Path, holder: Holder) -> bool:
    """Create the lease if absent, atomically (False: it exists)."""
    tmp = _write_temp(path, holder)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here: O_EXCL, then the content
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(tmp.read_bytes())
        return True
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


@dataclass
class Held:
    """The lease this launcher holds; keep_renewed() starts its renewer (at once: the checks before
    the launch may take minutes), release() gives it up when the command ends before the launch."""

    path: Path
    holder: Holder
    line: str

    def release(self) -> None:
        release(self.path, self.holder.token)

    def keep_renewed(self) -> None:
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(self.path), self.holder.token, str(os.getpid()),
             f"{self.holder.every_s:g}"],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip


class Refused(Exception):
    """A live run holds the folder: the message names it and the way out."""


def acquire(out: Path, me: Holder) -> Held:
    """Take the folder's lease, or raise Refused naming its live holder."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LEASE
    took_over = ""
    for _ in range(5):
        if _create(path, me):
            if (got := _read(path)) is not None and got.token == me.token:
                return Held(path, me, f"this run holds {path} (renewed every {me.every_s:g} s){took_over}")
            continue
        holder = _read(path)
        if holder is None:
            # Unreadable (written without hard links, not yet complete, or not ours): its age decides.
            with contextlib.suppress(FileNotFoundError):
                age = time.time() - path.stat().st_mtime
                if age <= STALE_RENEWALS * me.every_s:
                    raise Refused(
                        f"{path} exists but does not read as a lease ({age:.0f} s old); {_way_out(path)}"
                    )
            why, holder = "unreadable", None
        else:
            why = holder.gone(me, time.time())
            if why is None:
                raise Refused(
                    f"another run holds {out}: {holder.describe()}, last renewed "
                    f"{time.time() - holder.renewed:.0f} s ago. {_way_out(path)}"
                )
        aside = path.with_name(f".{path.name}.gone-{me.token}")
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            continue  # another start took it away first: try again
        moved = _read(aside)
        if holder is not None and (moved is None or moved.token != holder.token):
            # Another start replaced the stale lease between our read and our rename: give it back.
            with contextlib.suppress(OSError):
                os.link(aside, path)
            aside.unlink(missing_ok=True)
            continue
        aside.unlink(missing_ok=True)
        took_over = f"; took it over from {holder.describe() if holder else 'an unreadable lease'}: {why}"
    raise Refused(f"{path} changes hands too fast to take: {_way_out(path)}")


def live_holder(out: Path, me: Holder) -> Holder | None:
    """The live holder of the folder's lease, read without taking it (a dry run says who)."""
    holder = _read(out / LEASE)
    return holder if holder is not None and holder.gone(me, time.time()) is None else None


def _way_out(path: Path) -> str:
    return (
        "Wait for that run to end, stop it, or give another --output-dir; if it is gone for sure "
        f"(its machine lost), remove {path}"
    )


def release(path: Path, token: str) -> None:
    """Remove the lease if it is still ours."""
    held = _read(path)
    if held is not None and held.token == token:
        path.unlink(missing_ok=True)


def renew(path: Path, token: str, parent: int, every_s: float) -> None:
    """The renewer: every every_s seconds while `parent` lives, then release. Signals that stop the
    run are ignored here (the run saves during its grace period, still holding the lease)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    lost = False
    next_at = time.monotonic() + every_s
    while os.getppid() == parent:
        time.sleep(min(0.5, every_s))
        if time.monotonic() < next_at:
            continue
        next_at = time.monotonic() + every_s
        held = _read(path)
        if held is None and not path.exists():
            return  # released by the launcher (it ended before the launch)
        if held is None or held.token != token:
            if not lost:
                lost = True
                who = held.describe() if held else "nobody"
                print(
                    f"ftenv finetune: the lease {path} is no longer this run's (now {who})",
                    file=sys.stderr,
                )
            continue
        held.renewed = time.time()
        try:
            os.replace(_write_temp(path, held), path)
        except OSError as exc:  # the folder went away or filled up: the next renewal tries again
            print(f"ftenv finetune: the lease {path} not renewed: {exc}", file=sys.stderr)
    with contextlib.suppress(OSError):
        release(path, token)


def every_s() -> float:
    """FTENV_LEASE_RENEW_S as a number above 0 (ValueError naming the variable otherwise)."""
    return variables.read_seconds(variables.LEASE_RENEW_S, "the lease's renewal period")


if __name__ == "__main__":
    renew(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
