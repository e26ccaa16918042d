"""Reads a child process's output until a marker shows up, failing with what came instead of
hanging: the watchdog's tests drive real children (tests/support/fake_trainer.py) and must not wait
forever on one that never prints."""

from __future__ import annotations

import os
import selectors
import time


def read_until(proc, needle: bytes, deadline_s: float = 60, whole_line: bool = False) -> bytes:
    """Read proc.stdout until needle (and, with whole_line, the rest of its line) shows up;
    fails instead of hanging."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    got = b""
    end = time.monotonic() + deadline_s

    def done():
        return needle in got and (not whole_line or b"\n" in got.split(needle, 1)[1])

    while not done():
        assert time.monotonic() < end, f"{needle!r} never came; got {got[-500:]!r}"
        if sel.select(timeout=1):
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"EOF before {needle!r}; got {got[-500:]!r}"
            got += chunk
    return got
