"""`python -m ftenv.train.runlife.torchrun ARGS`: torchrun (torch.distributed.run) in this process,
with one change: a run that stopped on a signal exits STOPPED, not 1.

torchrun exits 1 whenever a worker exits non-zero, and when it is signalled itself: a preempted run
would read as a crash. The ranks that stop on a signal exit STOPPED, and rank 0 leaves a stop record
tagged with this launch's id (record.py); when torchrun ends, this reads it. Everything else
(arguments, output, the crash report, the exit code of a crash) is torchrun's.
"""

from __future__ import annotations

import os
import sys
import time

from ftenv.steps.stats import STOPPED
from ftenv.train.runlife import record


def _stopped(run_id: str, failures=None) -> dict | None:
    rec = record.read_stop(os.environ.get(record.OUTPUT_ENV), run_id)
    if rec is not None:
        return rec
    codes = {getattr(f, "exitcode", None) for f in (failures or {}).values()}
    return (
        {"signal": "a signal", "epoch": "?", "step": "?", "file": "(see the log)"}
        if codes == {STOPPED}
        else None
    )


def main(argv: list[str] | None = None) -> int:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        from torch.distributed.elastic.multiprocessing.api import SignalException
    except ImportError:  # a private module: without it, a signal to torchrun reads as a crash
        SignalException = ()  # type: ignore[assignment]

    run_id = f"{os.getpid()}-{time.time_ns()}"
    os.environ[record.RUN_ID_ENV] = run_id
    sys.argv[0] = "torchrun"
    try:
        run.main(argv if argv is not None else sys.argv[1:])
    except ChildFailedError as exc:
        rec = _stopped(run_id, exc.failures)
        if rec is None:
            raise
    except SignalException as exc:  # type: ignore[misc]
        rec = _stopped(run_id)
        if rec is None:
            print(f"torchrun: {exc}", file=sys.stderr)
            return 128 + int(getattr(exc, "sigval", 15))
    else:
        return 0
    print(f"ftenv finetune: {record.stop_line(rec)} (exit {STOPPED})", file=sys.stderr, flush=True)
    return STOPPED


if __name__ == "__main__":
    sys.exit(main())
