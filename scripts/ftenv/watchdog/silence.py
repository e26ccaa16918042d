"""The silence alarm of `ftenv watch`: a run that stops printing trainer lines is named, then ended
at a hard limit, so that a hung job does not burn GPU hours until NCCL's timeout. Pure Python:
the clock is passed in.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from ftenv import text, variables
from ftenv.outcome import HUNG
from ftenv.watchdog.line_mark import PREFIX
from ftenv.watchdog.step import CHECKPOINT, EPOCH, VALIDATION
from ftenv.watchdog.thresholds import HANG_LIMIT_S, SILENCE_FACTOR, SILENCE_MIN_S

#: What began a gap between trainer lines (a line's kind), in words.
STEP, VAL_LINE = "step", "val"
GAP_WORDS = {
    STEP: "step",
    VAL_LINE: "validation",
    VALIDATION: "validation",
    CHECKPOINT: "checkpoint save",
    EPOCH: "epoch start",
}
LIKELY = (
    "likely: a rank waits in a collective for a rank that died or hangs (NCCL), a read stalled on "
    "a network filesystem, or a deadlock (e.g. in a DataLoader worker)"
)
#: Step gaps kept for the median shown in the alarm.
_STEP_GAPS = 200


@dataclass(frozen=True)
class SilenceLimits:
    """When the alarm comes and when the run is ended (see the module's docstring)."""

    factor: float = SILENCE_FACTOR
    min_s: float = SILENCE_MIN_S
    hang_limit_s: float = HANG_LIMIT_S

    @property
    def on(self) -> bool:
        return self.factor > 0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SilenceLimits:
        """The limits the environment sets; a value that is not a number of 0 or more (the factor:
        0, or more than 1) is an error that names the setting and the fix."""
        values = {}
        for name, field, default in (
            (variables.WATCH_SILENCE_FACTOR, "factor", SILENCE_FACTOR),
            (variables.WATCH_SILENCE_MIN_S, "min_s", SILENCE_MIN_S),
            (variables.WATCH_HANG_LIMIT_S, "hang_limit_s", HANG_LIMIT_S),
        ):
            raw = (variables.given(name, environ) or "").strip()
            try:
                value = float(raw) if raw else default
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value >= 0) or (field == "factor" and 0 < value <= 1):
                need = (
                    "0 (off) or a number above 1" if field == "factor" else "a number of seconds, 0 or more"
                )
                raise ValueError(
                    f"{text.assignment(name, variables.given(name, environ))} is not understood: set {need}"
                )
            values[field] = value
        return cls(**values)


#: A rank's last trainer line: (when, its kind, the last step index it printed).
_Last = tuple[float, str, int | None]


class Silence:
    """Trainer lines as they arrive (progress()), and what the silence since the last one calls
    for (due()). Not thread-safe: the watchdog calls it under its lock."""

    def __init__(self, limits: SilenceLimits):
        self.limits = limits
        self.ranks: dict[int, _Last] = {}
        self.last_at: float | None = None
        self.last_kind = STEP
        self.armed = False
        self.longest = 0.0
        self.longest_kind: str | None = None
        self.longest_after: int | None = None
        self.step_gaps: deque[float] = deque(maxlen=_STEP_GAPS)
        self.last_step: int | None = None
        self.alarmed = False

    def progress(self, now: float, kind: str, rank: int | None = None, step: int | None = None) -> str | None:
        """A trainer line of `kind` (STEP, VAL_LINE, or a marker's EPOCH / VALIDATION /
        CHECKPOINT) at `now`; rank None: a line that names no rank. Returns a line to print when
        the line ends a silence that had been alarmed."""
        resumed = None
        if self.last_at is not None:
            gap = now - self.last_at
            if self.alarmed:
                resumed = (
                    f"{PREFIX} trainer lines resumed after {gap:.0f} s of silence: not a hang; the "
                    "alarm now waits for longer silences"
                )
            if gap > self.longest:
                self.longest, self.longest_kind, self.longest_after = gap, self.last_kind, self.last_step
            if kind == STEP and self.last_kind == STEP:
                self.step_gaps.append(gap)
        self.alarmed = False
        self.last_at, self.last_kind = now, kind
        if kind == STEP:
            self.armed = True
            self.last_step = step if step is not None else self.last_step
        if rank is not None:
            if step is None and rank in self.ranks:
                step = self.ranks[rank][2]
            self.ranks[rank] = (now, kind, step)
        return resumed

    def threshold(self) -> float:
        """Seconds without a trainer line before the alarm."""
        return max(self.limits.min_s, self.limits.factor * self.longest)

    def hang_limit(self) -> float | None:
        """Seconds without a trainer line before the run is ended; None: never."""
        if not self.limits.hang_limit_s:
            return None
        return max(self.limits.hang_limit_s, self.threshold())

    def due(self, now: float) -> str | None:
        """ "alarm" when the silence has just passed the threshold, "hang" when it has passed the
        hard limit, else None."""
        if not (self.limits.on and self.armed and self.last_at is not None):
            return None
        silence = now - self.last_at
        limit = self.hang_limit()
        if self.alarmed and limit is not None and silence >= limit:
            return "hang"
        if not self.alarmed and silence >= self.threshold():
            self.alarmed = True
            return "alarm"
        return None

    def silence(self, now: float) -> float:
        return now - self.last_at if self.last_at is not None else 0.0

    def _shown(self) -> str:
        if not self.longest_kind:
            return "no gap yet"
        after = f" after step {self.longest_after}" if self.longest_after is not None else ""
        median = f"; median step {statistics.median(self.step_gaps):.3f} s" if self.step_gaps else ""
        return f"{_secs(self.longest)} ({GAP_WORDS[self.longest_kind]}{after}){median}"

    def _ranks_text(self, now: float) -> str:
        parts = []
        for rank in sorted(self.ranks):
            at, kind, step = self.ranks[rank]
            where = f" {step}" if kind == STEP and step is not None else ""
            after = f" (after step {step})" if kind != STEP and step is not None else ""
            parts.append(f"rank {rank}: {GAP_WORDS[kind]}{where}{after}, {_secs(now - at)} ago")
        return "; ".join(parts) if parts else "no rank named in the lines"

    def alarm_line(self, now: float, stacks: str) -> str:
        """The one line of the alarm: how long, each rank's last line, the likely causes, what to
        do (stacks: where the Python stacks went, or why none)."""
        limit = self.hang_limit()
        end = (
            f"the run is ended at {_secs(limit)} without a line ({variables.WATCH_HANG_LIMIT_S}) "
            f"with exit {HUNG}"
            if limit is not None
            else f"the run is not ended ({variables.WATCH_HANG_LIMIT_S}=0)"
        )
        return (
            f"{PREFIX} SILENCE: no trainer line for {_secs(self.silence(now))} (alarm at "
            f"{_secs(self.threshold())}: at least {_secs(self.limits.min_s)} and {self.limits.factor:g}x "
            f"the longest gap so far, {self._shown()}); last lines: {self._ranks_text(now)}; {LIKELY}; "
            f"do: read the stacks ({stacks}), look for a rank that died or a node that is gone in the "
            f"other ranks' and nodes' logs, check `nvidia-smi` and the data's filesystem; {end}"
        )

    def hang_line(self, now: float, kill_after_s: float) -> str:
        return (
            f"{PREFIX} HANG: no trainer line for {_secs(self.silence(now))}, the hard limit "
            f"({variables.WATCH_HANG_LIMIT_S}={self.limits.hang_limit_s:g}): stopping the command "
            "(SIGTERM to its process "
            f"group, SIGKILL after {kill_after_s:g} s); exit {HUNG} so that the scheduler can retry the job"
        )


def _secs(x: float) -> str:
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"
