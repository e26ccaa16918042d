"""Both output streams of code run in this process, as `capfd` reads them but usable where a
function-scoped fixture is not (a module fixture that runs a command once for several tests)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Output:
    out: str = ""
    err: str = ""


@contextlib.contextmanager
def captured_fds() -> Iterator[Output]:
    """What Python and the C level write to stdout and stderr inside the block; filled in on exit."""
    got = Output()
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        saved_fds = os.dup(1), os.dup(2)
        saved_streams = sys.stdout, sys.stderr
        os.dup2(out_file.fileno(), 1)
        os.dup2(err_file.fileno(), 2)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (restored below)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        try:
            yield got
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = saved_streams
            for fd, saved in zip((1, 2), saved_fds, strict=True):
                os.dup2(saved, fd)
                os.close(saved)
            out_file.seek(0)
            err_file.seek(0)
            got.out = out_file.read().decode("utf-8", "replace")
            got.err = err_file.read().decode("utf-8", "replace")
