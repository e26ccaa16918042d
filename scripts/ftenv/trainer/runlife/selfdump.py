"""Each trainer process lets its watchdog see where it hangs without ptrace rights: it dumps every
thread's Python stack itself on the watchdog's signal (faulthandler, standard library), and names
the watchdog its ptracer (PR_SET_PTRACER) so that py-spy also works under Yama's ptrace_scope 1,
because a restricted pod drops CAP_SYS_PTRACE and may not add it back.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
from pathlib import Path

from ftenv import variables
from ftenv.watchdog import hang

#: linux/prctl.h (Yama): PR_SET_PTRACER, "Yama" in ASCII.
PR_SET_PTRACER = 0x59616D61
_open_files = []  # faulthandler writes to the file's descriptor: keep the file open


def _name_ptracer(pid: int) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PTRACER, pid, 0, 0, 0) == 0:
        return f"py-spy from the watchdog (pid {pid}) may read this process (PR_SET_PTRACER)"
    err = ctypes.get_errno()
    return f"PR_SET_PTRACER for the watchdog not set ({os.strerror(err)}; no Yama here: not needed)"


def install(environ=None) -> list[str]:
    """Under `ftenv watch` (its variables set): the dump on hang.STACK_SIGNAL and the ptracer;
    nothing otherwise. Returns the lines for the log."""
    notes = []
    folder = variables.read(variables.WATCH_STACKS_DIR, environ)
    if folder:
        path = hang.stack_file(
            Path(folder), (os.environ if environ is None else environ).get("RANK"), os.getpid()
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            f = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the process's life)
        except OSError as exc:
            notes.append(f"no stack dump on {hang.STACK_SIGNAL.name}: {path}: {exc.strerror or exc}")
        else:
            _open_files.append(f)
            faulthandler.register(hang.STACK_SIGNAL, file=f, all_threads=True, chain=False)
            notes.append(
                f"every thread's stack to {path} on {hang.STACK_SIGNAL.name} (the watchdog's silence alarm)"
            )
    watcher = variables.read(variables.WATCH_PID, environ)
    if watcher and watcher.isdigit():
        notes.append(_name_ptracer(int(watcher)))
    return notes
