"""`python -m ftenv.train.funasr_entry ++key=value ...`: FunASR's `funasr-train-ds`, in this process.

The self-check's recipe path starts this through torchrun only where the real script cannot run
as is: on a machine without CUDA (FTENV_FUNASR_CPU_SHIM=1 applies ftenv.train.funasr_cpu_shim) or when a
test injects a per-shape attention stall (FTENV_TEST_SDPA_STALL_S, ftenv.train.stall). It then calls the
very function the `funasr-train-ds` console script calls (read from funasr's entry points). On a GPU
without the test aid, the self-check runs the `funasr-train-ds` script itself.
"""

from __future__ import annotations

import logging
import os
import sys
from importlib import metadata

CPU_SHIM_ENV = "FTENV_FUNASR_CPU_SHIM"
SCRIPT = "funasr-train-ds"


def entry_point():
    for ep in metadata.entry_points(group="console_scripts"):
        if ep.name == SCRIPT:
            return ep
    raise SystemExit(f"{SCRIPT} is not installed (funasr missing?)")


def main() -> int:
    ep = entry_point()
    notes = []
    if os.environ.get(CPU_SHIM_ENV) == "1":
        from ftenv.train import funasr_cpu_shim

        notes += funasr_cpu_shim.apply()
    from ftenv.train import stall

    if stall.install_from_env() is not None:
        notes.append(f"TEST AID: SDPA stall of {os.environ[stall.ENV]} s per new shape")
    for note in notes:
        print(f"ftenv.train.funasr_entry: {note}", file=sys.stderr)
    sys.argv[0] = SCRIPT
    logging.getLogger(__name__).debug("running %s (%s)", SCRIPT, ep.value)
    result = ep.load()()
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
