"""What `ftenv watch` does about a silent run: dump the training processes' Python stacks with
py-spy and stop the command, so that a hang leaves evidence. py-spy needs ptrace rights (Docker:
`--cap-add SYS_PTRACE`); without them the alarm says why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from ftenv.attention.live import process_tree

PY_SPY = "py-spy"
YAMA = Path("/proc/sys/kernel/yama/ptrace_scope")
CAP_SYS_PTRACE = 19
#: Processes dumped at most, and how long one dump may take.
MAX_DUMPS = 16
DUMP_TIMEOUT_S = 20.0
CAP_FIX = (
    "give the container CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE; Kubernetes: "
    "securityContext.capabilities.add: [SYS_PTRACE])"
)


def py_spy() -> str | None:
    """py-spy on PATH, or beside this Python (a venv's bin, not always on PATH)."""
    found = shutil.which(PY_SPY)
    if found:
        return found
    beside = Path(sys.executable).parent / PY_SPY
    return str(beside) if os.access(beside, os.X_OK) else None


def _has_cap_sys_ptrace() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def ptrace_blocker(pid: int, yama: Path = YAMA) -> str | None:
    """Why py-spy may not read process pid from here, or None when the kernel allows it."""
    try:
        scope = int(yama.read_text().strip())
    except (OSError, ValueError):
        scope = 0  # no Yama: the classic rule
    cap = _has_cap_sys_ptrace()
    if scope >= 3:
        return f"ptrace is disabled on this host ({yama} = {scope})"
    if scope in (1, 2) and not cap:
        return f"{yama} = {scope} allows it only with CAP_SYS_PTRACE: {CAP_FIX}"
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return f"process {pid} is gone"
    if owner != os.geteuid() and not cap:
        return f"the training processes run as another user (uid {owner}): run the watchdog as that user"
    return None


def _rank_of(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in raw.split(b"\0"):
        if item.startswith(b"RANK="):
            return item[5:].decode("utf-8", "replace")
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")[:300]
    except OSError:
        return "?"


def training_processes(root: int) -> list[tuple[int, str | None]]:
    """(pid, RANK) of the processes to dump: the first (shallowest) process of each rank under
    root (torchrun's workers; their DataLoader workers inherit RANK and come later), else every
    process of the tree (a trainer started without torchrun)."""
    tree = process_tree(root)
    ranks: dict[str, int] = {}
    for pid in tree:
        rank = _rank_of(pid)
        if rank is not None and rank not in ranks:
            ranks[rank] = pid
    if ranks:
        return [(pid, rank) for rank, pid in sorted(ranks.items(), key=lambda x: x[1])][:MAX_DUMPS]
    return [(pid, None) for pid in tree][:MAX_DUMPS]


def dump_stacks(root: int, folder: Path, silence_s: float) -> str:
    """Write the Python stacks of root's training processes to a file in folder; returns where
    they went, or why there are none (for the alarm line)."""
    tool = py_spy()
    if tool is None:
        return "py-spy not installed, no stacks written"
    processes = training_processes(root)
    blocker = ptrace_blocker(processes[0][0] if processes else root)
    if blocker:
        return f"no stacks: {blocker}"
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = folder / f"ftenv-hang-stacks-{stamp}.txt"
    parts = [
        f"ftenv watch: Python stacks of the training processes after {silence_s:.0f} s without a "
        f"trainer line ({stamp} UTC), by `py-spy dump --pid PID`\n"
    ]
    for pid, rank in processes:
        head = f"\n=== pid {pid}{f' RANK={rank}' if rank is not None else ''}: {_cmdline(pid)}\n"
        try:
            out = subprocess.run(
                [tool, "dump", "--pid", str(pid)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=DUMP_TIMEOUT_S,
            )
            body = out.stdout + (f"[py-spy exit {out.returncode}] {out.stderr}" if out.returncode else "")
        except subprocess.TimeoutExpired:
            body = f"[py-spy took more than {DUMP_TIMEOUT_S:g} s]\n"
        except OSError as exc:
            body = f"[py-spy did not run: {exc}]\n"
        parts.append(head + body)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts))
    except OSError as exc:
        return f"stacks not written: {path}: {exc.strerror or exc}"
    return f"stacks of {len(processes)} process{'es' if len(processes) != 1 else ''} in {path}"


def stop_command(proc: subprocess.Popen, grace_s: float) -> int:
    """Stop the command: SIGTERM to its process group (torchrun forwards it to its workers), wait
    up to grace_s, then SIGKILL to the group and to every process of its tree (torchrun starts
    its workers in sessions of their own, out of the group's reach); returns the command's exit
    status as Popen gives it."""
    tree = process_tree(proc.pid)[1:]  # taken now: once torchrun is gone its workers are orphans
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return proc.wait()
