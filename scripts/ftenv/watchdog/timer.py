"""The watchdog for a custom training loop: call `StepTimer.tick()` once per step, after a call that
waits for the GPU (usage: docs/watchdog.md).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from ftenv.attention import process_settings
from ftenv.watchdog import slow_step_lines, stats
from ftenv.watchdog.step import Step
from ftenv.watchdog.thresholds import LIVE_WARMUP, SLOW_FACTOR


class StepTimer:
    def __init__(
        self,
        factor: float = SLOW_FACTOR,
        warmup: int = LIVE_WARMUP,
        rank: int | None = None,
        stream: TextIO | None = None,
        clock=time.perf_counter,
    ):
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        self.stream, self.clock = stream, clock
        self.slow_lines = slow_step_lines.SlowStepLines(
            factor=factor, warmup=warmup, settings=lambda: process_settings.read_process_settings(None)
        )
        self._last = clock()
        self._index = 0

    def start(self) -> None:
        """Restart the clock (e.g. right before the loop, after model set-up)."""
        self._last = self.clock()

    def tick(self, batch: int | None = None, padded_len: int | None = None) -> list[str]:
        now = self.clock()
        seconds, self._last = now - self._last, now
        return self.record(seconds, batch=batch, padded_len=padded_len)

    def record(self, seconds: float, batch: int | None = None, padded_len: int | None = None) -> list[str]:
        """One step that took `seconds`; returns (and prints) the watchdog's lines, if any."""
        self._index += 1
        step = Step(self._index, float(seconds), batch, padded_len, self.rank)
        lines = self.slow_lines.observe(step)
        self._print(lines)
        return lines

    def summary(self) -> stats.Summary:
        return self.slow_lines.summary()

    def finish(self) -> stats.Summary:
        """Print the summary lines and return the summary."""
        self._print(self.slow_lines.summary_lines(final=True))
        return self.summary()

    def _print(self, lines: list[str]) -> None:
        if lines:
            out = self.stream or sys.stderr
            out.write("".join(f"{x}\n" for x in lines))
            out.flush()
