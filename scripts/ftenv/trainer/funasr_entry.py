"""`python -m ftenv.trainer.funasr_entry ++key=value ...`: FunASR's `funasr-train-ds` in this process,
so that every training process gets the run's life, the faster path and the data counts without
touching site-packages.
"""

from __future__ import annotations

import logging
import sys
from importlib import metadata

from ftenv import variables
from ftenv.data import runtime
from ftenv.trainer import compile_setting, funasr_cpu_shim
from ftenv.trainer.runlife import hooks as runlife_hooks
from ftenv.trainer.runlife import selfdump

SCRIPT = "funasr-train-ds"


def entry_point():
    for ep in metadata.entry_points(group="console_scripts"):
        if ep.name == SCRIPT:
            return ep
    raise SystemExit(f"{SCRIPT} is not installed (funasr missing?)")


def main() -> int:
    ep = entry_point()
    notes = []
    try:
        parts, bucketing = compile_setting.read()
    except ValueError as exc:
        raise SystemExit(f"ftenv.trainer.funasr_entry: {exc}") from None
    if parts or bucketing is not None:
        from ftenv.trainer.fastpath import collator
        from ftenv.trainer.fastpath import parts as fast_path

        if refused := fast_path.refused(parts, bucketing):
            notes += refused
        else:
            notes.append(fast_path.install_on_build(parts, bucketing))
            notes += collator.install(parts, bucketing)
    notes += runlife_hooks.install()
    notes += selfdump.install()
    if variables.read(variables.FUNASR_CPU_SHIM) == "1":
        notes += funasr_cpu_shim.apply()
    notes += runtime.install_from_env()  # FunASR's silent substitutions and drops, for ftenv watch
    from ftenv.trainer import stall

    if stall.install_from_env() is not None:
        notes.append(f"TEST AID: SDPA stall of {variables.read(variables.TEST_SDPA_STALL_S)} s per new shape")
    for note in notes:
        print(f"ftenv.trainer.funasr_entry: {note}", file=sys.stderr)
    sys.argv[0] = SCRIPT
    logging.getLogger(__name__).debug("running %s (%s)", SCRIPT, ep.value)
    result = ep.load()()
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
