"""`python -m ftenv.launch.runlife.torchrun ARGS`: torchrun in this process, except that a run that
stopped on a signal exits STOPPED, not 1 (torchrun's exit for any failure), and torchrun waits
longer for the workers' save after a signal; everything else is torchrun's.
"""

from __future__ import annotations

import os
import sys
import time

from ftenv import upstream, variables
from ftenv.outcome import STOPPED, stop_line
from ftenv.trainer.runlife import record


def _stopped(run_id: str, started: float, failures=None) -> dict | None:
    """This launch's stop: its record (rank 0 may run on another node: any record written since this
    node's launch began counts), else every failed worker exited STOPPED."""
    rec = record.read_stop(variables.read(variables.OUTPUT_DIR), run_id, since=started)
    if rec is not None:
        return rec
    codes = {getattr(f, "exitcode", None) for f in (failures or {}).values()}
    return (
        {"signal": "a signal", "epoch": "?", "step": "?", "file": "(see the log)"}
        if codes == {STOPPED}
        else None
    )


def _longer_grace_after_a_signal() -> str:
    """Only after torchrun itself was signalled: when a worker fails, torchrun's 30 s still apply
    (the job must end soon); the first signal starts the stop, later ones do not interrupt it.
    Private torch API: when it is not there, torchrun's 30 s stay."""
    try:
        grace = variables.read_float(variables.STOP_GRACE_S)
        from torch.distributed.elastic.multiprocessing import api

        handler, close = api._terminate_process_handler, api.PContext.close
    except (ImportError, AttributeError, ValueError) as exc:
        return f"torchrun's wait for its workers after a signal: its own (30 s; {exc})"
    if refused := upstream.refusal(upstream.TORCHRUN_GRACE):
        return f"torchrun's wait for its workers after a signal: its own (30 s; {refused})"
    signalled = []

    def on_signal(signum, frame):
        signalled.append(signum)
        if len(signalled) == 1:
            handler(signum, frame)
        # Later ones are not raised: under Slurm every process of the step gets the signal, the
        # watchdog forwards it, srun and a preemption send more; each would cut torchrun's wait for
        # the workers' save short, and it would exit before rank 0 has written the stop record.

    def close_after_signal(self, death_sig=None, timeout=30):
        return close(self, death_sig, max(timeout, grace) if signalled else timeout)

    api._terminate_process_handler = on_signal
    api.PContext.close = close_after_signal
    return f"torchrun waits {grace:g} s for its workers after a signal ({variables.STOP_GRACE_S})"


def main(argv: list[str] | None = None) -> int:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        from torch.distributed.elastic.multiprocessing.api import SignalException
    except ImportError:  # a private module: without it, a signal to torchrun reads as a crash
        SignalException = ()  # type: ignore[assignment]

    started = time.time()
    run_id = f"{os.getpid()}-{time.time_ns()}"
    variables.export({variables.RUN_ID: run_id})
    sys.argv[0] = "torchrun"
    print(f"ftenv finetune: {_longer_grace_after_a_signal()}", file=sys.stderr, flush=True)
    try:
        run.main(argv if argv is not None else sys.argv[1:])
    except ChildFailedError as exc:
        rec = _stopped(run_id, started, exc.failures)
        if rec is None:
            raise
    except SignalException as exc:  # type: ignore[misc]
        rec = _stopped(run_id, started)
        if rec is None:
            print(f"torchrun: {exc}", file=sys.stderr)
            return 128 + int(getattr(exc, "sigval", 15))
    else:
        return 0
    print(f"ftenv finetune: {stop_line(rec)} (exit {STOPPED})", file=sys.stderr, flush=True)
    return STOPPED


if __name__ == "__main__":
    code = main()
    if code == STOPPED:  # the workers are gone and saved: skip tearing down torch (seconds when busy)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
