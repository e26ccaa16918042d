"""What the watchdog says about slow steps, and how often (a handful of lines per run, not one per
slow step), shared by `ftenv watch` and the step timer.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import deque
from collections.abc import Callable

from ftenv import outcome
from ftenv.attention.process_settings import AttentionSettings
from ftenv.watchdog import stats
from ftenv.watchdog import step as step_types
from ftenv.watchdog.detector import Detector, SlowEvent
from ftenv.watchdog.funasr_log import PHASES
from ftenv.watchdog.line_mark import INDENT, PREFIX
from ftenv.watchdog.messages import first_lines, short_line
from ftenv.watchdog.not_step_time import apart_text, pause_text
from ftenv.watchdog.step import DATA, NEW_SHAPE, NO_SHAPE, RECOMPILE, SEEN_SHAPE, Step
from ftenv.watchdog.thresholds import LIVE_WARMUP, REPEAT, SLOW_FACTOR

#: How long a slow step's line waits for the settings read started at the first step.
SETTINGS_WAIT_S = 2.0
#: Steps kept for the summary (the counters in the summary stay exact beyond it).
KEEP_STEPS = 200_000


class SlowStepLines:
    """Detector + printing policy + what the summary needs. observe() returns the lines to print
    (without newlines). `settings` is called at most once, when the first slow step needs it."""

    def __init__(
        self,
        factor: float = SLOW_FACTOR,
        warmup: int = LIVE_WARMUP,
        repeat: int = REPEAT,
        settings: Callable[[], AttentionSettings | None] | None = None,
        time_holds_pause: bool = False,
    ):
        self.detector = Detector(factor=factor, warmup=warmup)
        self.factor, self.repeat = factor, max(repeat, 1)
        self._settings_fn, self._settings, self._reader = settings, None, None
        self.steps: deque[tuple] = deque(maxlen=KEEP_STEPS)
        self.n_steps = 0
        self.val_lines = 0
        self.bad_lines = 0
        self.events: dict[str, list[SlowEvent]] = {}
        self.seen_steps = 0
        self._recompiled = False  # a recompile line since the last step line
        self.bad_example: str | None = None
        #: --time total: a step's time holds the validation or checkpoint saving before it.
        self.time_holds_pause = time_holds_pause
        self._nth: dict[int, int] = {}  # steps seen per rank
        self._before: dict[int, list[str]] = {}  # markers since the rank's last step

    def note_marker(self, kind: str, rank: int) -> None:
        """The trainer's `Train epoch:`, `Validate epoch:` or `Save checkpoint:` line for a rank:
        the rank's next step carries it (Step.before)."""
        step_types.note_marker(self._before, kind, rank)

    def _apart(self, rank: int, step_in_epoch: int | None) -> tuple[tuple[str, ...], str | None]:
        nth = self._nth[rank] = self._nth.get(rank, 0) + 1
        before = tuple(self._before.pop(rank, ()))
        return before, step_types.apart_reason(nth, step_in_epoch, before, self.time_holds_pause)

    def note_recompile(self) -> None:
        """Dynamo logged a recompile (funasr_log.RECOMPILE_MARK): it names the next step's cause."""
        self._recompiled = True

    @property
    def settings(self) -> AttentionSettings | None:
        """The training process's attention settings, read once. prefetch() starts the read early,
        in a thread, so that a slow read (nvidia-smi on a busy node) never holds the pass-through; a
        read that has not finished 2 s after it is needed counts as unknown."""
        self.prefetch()
        self._reader.join(timeout=SETTINGS_WAIT_S)
        return self._settings

    def prefetch(self) -> None:
        if self._reader is None:
            self._reader = threading.Thread(target=self._read_settings, daemon=True, name="ftenv-settings")
            self._reader.start()

    def _read_settings(self) -> None:
        try:
            self._settings = self._settings_fn() if self._settings_fn else None
        except Exception:
            self._settings = None

    def observe(self, step: Step) -> list[str]:
        before, apart = self._apart(step.rank, step.step_in_epoch)
        step = step.with_changes(before=before, apart=apart)
        new, event = self.detector.observe(step)
        self._count(
            step.index,
            step.seconds,
            step.batch,
            step.padded_len,
            step.rank,
            new,
            step.data_load,
            step.phase("backward_time"),
            step.pause,
            before,
            apart,
        )
        return self._say(event)

    def observe_values(
        self,
        index: int,
        seconds: float,
        batch: int | None,
        padded_len: int | None,
        rank: int,
        phase_values: tuple[float, ...] = (),
        step_in_epoch: int | None = None,
        pause: float | None = None,
    ) -> list[str]:
        """observe() for the watchdog's hot path (ftenv.watchdog.funasr_log.fast_fields): phase_values are
        FunASR's (data_load, forward_time, backward_time, optim_time); a Step is built only for a
        slow step."""
        before, apart = self._apart(rank, step_in_epoch)
        judged = self.detector.classify(
            rank, seconds, batch, padded_len, index=index, apart=apart is not None
        )
        new, baseline, earlier, earlier_new = judged
        data, backward = (phase_values[0], phase_values[2]) if len(phase_values) > 2 else (None, None)
        self._count(index, seconds, batch, padded_len, rank, new, data, backward, pause, before, apart)
        if baseline is None:
            return self._say(None)
        phases = tuple(zip(PHASES, phase_values, strict=False))
        step = Step(index, seconds, batch, padded_len, rank, new, phases)
        return self._say(self.detector.event(step, baseline, earlier, earlier_new))

    def _count(self, index, seconds, batch, padded_len, rank, new, data_load, backward, pause, before, apart):
        if not self.n_steps:  # the trainer is up: read its settings now, off the hot path
            self.prefetch()
        self.n_steps += 1
        self.seen_steps += new is False and apart is None
        # A plain tuple, not a Step: cheaper to make and to keep (up to KEEP_STEPS of them).
        self.steps.append(
            (index, seconds, batch, padded_len, rank, new, data_load, backward, pause, before, apart)
        )

    def _say(self, event: SlowEvent | None) -> list[str]:
        """The lines for a step's event (None: the step is not slow). A new-shape step right after
        a recompile line is put down to the recompile; the line counts for that step only."""
        recompiled, self._recompiled = self._recompiled, False
        if event is None:
            return []
        if recompiled and event.cause == NEW_SHAPE and event.waits is None:
            event = dataclasses.replace(event, cause=RECOMPILE)
        same = self.events.setdefault(event.cause, [])
        same.append(event)
        n = len(same)
        if n == 1:
            return first_lines(event, self.settings)
        if n < self.repeat:
            return [short_line(event)]
        if n == self.repeat:
            return [self.pattern_line(event.cause)]
        return []

    def pattern_line(self, cause: str) -> str:
        events = self.events.get(cause, [])
        n = len(events) + sum(e.earlier_slow for e in events)
        if cause == NEW_SHAPE:
            seen_slow = len(self.events.get(SEEN_SHAPE, []))
            extra = [e.step.seconds - e.baseline for e in events]
            each = sum(extra) / len(extra) if extra else math.nan
            waiting = sum(e.waits is not None for e in events)
            ddp = f" or, {waiting} of them, waiting for another rank's (DDP all-reduce)" if waiting else ""
            tail = f"; {self.seen_steps} steps on shapes seen before, " + (
                f"{seen_slow} of them slow" if seen_slow else "none of them slow"
            )
            if waiting:
                tail += " but those waiting"
            return (
                f"{PREFIX} PATTERN: {n} slow steps so far, every one on a batch shape new to its "
                f"rank{ddp}{tail}: each new (batch, padded length) costs about {each:.2f} s once. "
                "Further slow steps on new shapes are counted, not printed; totals in the summary."
            )
        names = {
            SEEN_SHAPE: "on shapes seen before",
            DATA: "waiting for data",
            NO_SHAPE: "without a shape",
            RECOMPILE: "on new shapes that torch.compile recompiled for",
        }
        return (
            f"{PREFIX} PATTERN: {n} slow steps so far {names.get(cause, cause)}. Further ones are "
            "counted, not printed; totals in the summary."
        )

    def summary(self) -> stats.Summary:
        steps = [
            Step(i, sec, b, p, r, new, _phases(d, bw), pause=pause, before=before, apart=apart)
            for i, sec, b, p, r, new, d, bw, pause, before, apart in self.steps
        ]
        known = self._settings  # only if already read: the summary never waits for the read
        return stats.summarize(
            steps, slow_factor=self.factor, deprioritized=known.deprioritized if known else None
        )

    def summary_lines(self, final: bool = True, verdict_label: str = "verdict") -> list[str]:
        """The summary block; verdict_label names the verdict line (after a failed command: what
        the verdict is about, see ftenv.watchdog.crash)."""
        s = self.summary()
        head = "SUMMARY" if final else "summary so far"
        if not self.n_steps:
            return [f"{PREFIX} {head}: no training step lines seen ({self.val_lines} validation lines)"]
        if not s.n_steps:
            return [
                f"{PREFIX} {head}: {self.n_steps} training steps, nothing to judge yet",
                *(f"{PREFIX} {t}" for t in (apart_text(s.apart_steps),) if t),
            ]
        kept = "" if self.n_steps == len(self.steps) else f" (statistics over the last {len(self.steps)})"
        lines = [
            f"{PREFIX} {head}: {self.n_steps} training steps{kept}, ranks "
            f"{','.join(map(str, s.ranks))}, {self.val_lines} validation lines; median {s.median:.3f} s, "
            f"p95 {s.p95:.3f} s, max {s.max:.3f} s, mean {s.mean:.3f} s; {s.n_slow} slow steps "
            f"(>= {self.factor:g}x {s.baseline:.3f} s), {stats.on_new_text(s, 'on new shapes')}; "
            f"{s.time_lost:.1f} s lost to them; mean without them {s.mean_without_slow:.3f} s",
            # A FAIL says only what failed; otherwise the rules as they stand.
            f"{PREFIX} {verdict_label}: {s.verdict}: "
            + "; ".join(s.failed_rules if s.verdict == outcome.FAIL else s.reasons[:3]),
        ]
        lines.extend(f"{PREFIX} {t}" for t in (apart_text(s.apart_steps), pause_text(s.pauses)) if t)
        return lines + stats.fix_lines(s, f"{PREFIX} ", INDENT)


def _phases(data_load: float | None, backward: float | None) -> tuple[tuple[str, float], ...]:
    out = []
    if data_load is not None:
        out.append(("data_load", data_load))
    if backward is not None:
        out.append(("backward_time", backward))
    return tuple(out)
