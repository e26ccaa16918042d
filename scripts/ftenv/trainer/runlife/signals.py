"""The stop on a signal in each training process: a signal only sets a flag, and at each step
boundary the ranks all-reduce their flags, so that every rank stops at the same boundary (rank 0
saves) whichever rank was signalled; a signal before the loop exits at once.
"""

from __future__ import annotations

import os
import signal

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


class StopRequest:
    """The flag the handlers set; `pending` is the signal number, 0 for none. `exit_code`: the
    process's exit code when a signal comes before the training loop."""

    def __init__(self, exit_code: int) -> None:
        self.pending = 0
        self.in_loop = False
        self.exit_code = exit_code

    def handler(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        if not self.in_loop:
            os.write(2, f"ftenv: {name} before training started: nothing to save, exiting\n".encode())
            raise SystemExit(self.exit_code)
        if not self.pending:
            self.pending = signum
            os.write(2, f"ftenv: {name} received: stopping at the end of this step, saved\n".encode())

    def install(self) -> str:
        for sig in SIGNALS:
            signal.signal(sig, self.handler)
        return "stop on " + ", ".join(s.name for s in SIGNALS) + " at a step boundary, saved"


def agree(pending: int, device) -> int:
    """The signal every rank stops for (0: go on): the MAX over the ranks, or this rank's alone."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return pending
    flag = torch.tensor([pending], dtype=torch.int32).to(device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())


class BoundaryLoader:
    """FunASR's training DataLoader with a call before each batch is fetched (and once after the
    last one): `on_boundary(batches_done)`. Everything else is the DataLoader's."""

    def __init__(self, loader, on_boundary):
        self._loader = loader
        self._on_boundary = on_boundary

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        batches = iter(self._loader)
        done = 0
        while True:
            self._on_boundary(done)
            try:
                batch = next(batches)
            except StopIteration:
                return
            done += 1
            yield batch
