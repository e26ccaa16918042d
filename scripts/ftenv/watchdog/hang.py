"""What `ftenv watch` does about a silent run: dump the training processes' Python stacks and stop
the command, so that a hang leaves evidence. Two ways, both written to one file: every thread's
stack from each trainer process itself (Python's faulthandler on STACK_SIGNAL, which the trainer
entry registers: no ptrace, so it works with every capability dropped), and py-spy's, which needs
ptrace rights: CAP_SYS_PTRACE, or (Yama's ptrace_scope 1) the trainer naming the watchdog its
ptracer (PR_SET_PTRACER, done by the trainer entry); without them the file says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from ftenv import variables
from ftenv.attention.process_settings import proc_environ, process_tree

PY_SPY = "py-spy"
YAMA = Path("/proc/sys/kernel/yama/ptrace_scope")
CAP_SYS_PTRACE = 19
#: Processes dumped at most, and how long one dump may take.
MAX_DUMPS = 16
DUMP_TIMEOUT_S = 20.0
#: The signal on which each trainer process writes every thread's stack (faulthandler): ignored by
#: default, so a process that did not register it is unharmed; none of the stop signals (SIGTERM,
#: SIGINT, SIGUSR1, SIGUSR2) nor of those torchrun or the watchdog forward.
STACK_SIGNAL = signal.SIGWINCH
#: Folder, under the output folder, of the trainer processes' own dumps (one file per rank).
STACKS_DIR = "ftenv-stacks"
#: Written by the watchdog in the output folder when it ended a hung run (exit HUNG), so that a batch
#: script can tell a hang from a task Slurm ended (srun returns the highest of its tasks' codes).
HUNG_RECORD = "ftenv-hung.json"
#: How long the watchdog waits for the processes' own dumps.
SELF_DUMP_WAIT_S = 3.0
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


def command_env(folder: Path) -> dict[str, str]:
    """What the watchdog tells its command (the trainer entry reads it): its own pid, to be let in
    under Yama (PR_SET_PTRACER), and where each process dumps its own stacks."""
    return {variables.WATCH_PID: str(os.getpid()), variables.WATCH_STACKS_DIR: str(folder / STACKS_DIR)}


def stack_file(folder: Path, rank: str | None, pid: int) -> Path:
    """The file a trainer process appends its own stacks to, in folder (WATCH_STACKS_DIR)."""
    return folder / (f"rank-{rank}.txt" if rank is not None else f"pid-{pid}.txt")


def ptrace_blocker(pid: int, yama: Path = YAMA) -> str | None:
    """Why py-spy may not read process pid from here, or None when the kernel allows it."""
    try:
        scope = int(yama.read_text().strip())
    except (OSError, ValueError):
        scope = 0  # no Yama: the classic rule
    cap = _has_cap_sys_ptrace()
    if scope >= 3:
        return f"ptrace is disabled on this host ({yama} = {scope})"
    # Scope 1 lets a process name its ptracer: the trainer entry names the watchdog it runs under.
    named = scope == 1 and variables.given(variables.WATCH_PID, proc_environ(pid) or {}) == str(os.getpid())
    if scope in (1, 2) and not cap and not named:
        why = "" if scope == 2 else " or a trainer started under this watchdog (ftenv finetune)"
        return f"{yama} = {scope} allows it only with CAP_SYS_PTRACE{why}: {CAP_FIX}"
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return f"process {pid} is gone"
    if owner != os.geteuid() and not cap:
        return f"the training processes run as another user (uid {owner}): run the watchdog as that user"
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
        rank = (proc_environ(pid) or {}).get("RANK")  # torchrun sets it in each worker
        if rank is not None and rank not in ranks:
            ranks[rank] = pid
    if ranks:
        return [(pid, rank) for rank, pid in sorted(ranks.items(), key=lambda x: x[1])][:MAX_DUMPS]
    return [(pid, None) for pid in tree][:MAX_DUMPS]


def _self_dumps(processes: list[tuple[int, str | None]]) -> dict[int, str]:
    """Ask each process that registered STACK_SIGNAL (a trainer started under this watchdog) for
    its own dump; what each appended to its file, by pid."""
    asked: dict[int, tuple[Path, int]] = {}
    for pid, rank in processes:
        folder = variables.given(variables.WATCH_STACKS_DIR, proc_environ(pid) or {})
        if not folder:
            continue
        path = stack_file(Path(folder), rank, pid)
        size = path.stat().st_size if path.is_file() else 0
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, STACK_SIGNAL)
            asked[pid] = (path, size)
    got: dict[int, str] = {}
    deadline = time.monotonic() + SELF_DUMP_WAIT_S
    while asked and time.monotonic() < deadline:
        time.sleep(0.1)
        for pid, (path, size) in list(asked.items()):
            if path.is_file() and path.stat().st_size > size:
                time.sleep(0.1)  # faulthandler writes thread after thread
                with path.open("rb") as f:
                    f.seek(size)
                    got[pid] = f.read().decode("utf-8", "replace")
                del asked[pid]
    return got


def _py_spy_dump(tool: str, pid: int) -> str:
    try:
        out = subprocess.run(
            [tool, "dump", "--pid", str(pid)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=DUMP_TIMEOUT_S,
        )
        return out.stdout + (f"[py-spy exit {out.returncode}] {out.stderr}" if out.returncode else "")
    except subprocess.TimeoutExpired:
        return f"[py-spy took more than {DUMP_TIMEOUT_S:g} s]\n"
    except OSError as exc:
        return f"[py-spy did not run: {exc}]\n"


def dump_stacks(root: int, folder: Path, silence_s: float) -> str:
    """Write the Python stacks of root's training processes to a file in folder: each process's
    own dump (faulthandler) and py-spy's where ptrace allows it; returns where they went, or why
    there are none (for the alarm line)."""
    processes = training_processes(root)
    own = _self_dumps(processes)
    tool = py_spy()
    blocker = ("py-spy not installed" if tool is None else None) or ptrace_blocker(
        processes[0][0] if processes else root
    )
    if not own:
        if tool is None:
            return "py-spy not installed, no stacks written"
        if blocker:
            return f"no stacks: {blocker}"
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = folder / f"ftenv-hang-stacks-{stamp}.txt"
    how = []
    if own:
        how.append(f"each process's own dump of every thread (faulthandler, {STACK_SIGNAL.name})")
    how.append(f"no py-spy: {blocker}" if blocker else "`py-spy dump --pid PID`")
    parts = [
        f"ftenv watch: Python stacks of the training processes after {silence_s:.0f} s without a "
        f"trainer line ({stamp} UTC), by {'; '.join(how)}\n"
    ]
    for pid, rank in processes:
        head = f"\n=== pid {pid}{f' RANK={rank}' if rank is not None else ''}: {_cmdline(pid)}\n"
        body = ""
        if pid in own:
            body += f"--- its own dump (faulthandler, most recent call first)\n{own[pid]}"
        if not blocker:
            body += ("--- py-spy\n" if pid in own else "") + _py_spy_dump(tool, pid)
        parts.append(head + (body or "[no stacks: it did not dump its own and py-spy may not read it]\n"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts))
    except OSError as exc:
        return f"stacks not written: {path}: {exc.strerror or exc}"
    n = len(processes)
    by = "own dumps" + ("" if blocker else " and py-spy") if own else "py-spy"
    return f"stacks of {n} process{'es' if n != 1 else ''} ({by}) in {path}"


def write_hung_record(folder: Path, silence_s: float, stacks: str | None) -> str:
    """Say in the output folder that this node's run hung and was ended; returns a line for the log."""
    path = folder / HUNG_RECORD
    data = {
        "hung_after_s": round(silence_s),
        "ended_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "stacks": stacks,
        "host": os.uname().nodename,
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        return f"hang record not written: {path}: {exc.strerror or exc}"
    return f"hang recorded in {path}"


def stop_command(proc: subprocess.Popen, kill_after_s: float) -> int:
    """Stop the command: SIGTERM to its process group (torchrun forwards it to its workers), wait
    up to kill_after_s, then SIGKILL to the group and to every process of its tree (torchrun starts
    its workers in sessions of their own, out of the group's reach); returns the command's exit
    status as Popen gives it."""
    tree = process_tree(proc.pid)[1:]  # taken now: once torchrun is gone its workers are orphans
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + kill_after_s
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return proc.wait()
