"""What the watchdog says about slow steps, and how often: shared by `ftenv watch` (FunASR's log)
and `ftenv.steps.timer` (custom training loops).

Printing policy, so that a long run gets a handful of lines, not one per slow step:
- the first slow step of each cause gets one full line: rank, step, time and ratio, batch shape and
  whether it is new to the rank, the live attention settings, the cause and the fix;
- the next `repeat - 1` slow steps of that cause get one short line each;
- at `repeat`, one line says the pattern repeats, with the counts, and further slow steps of that
  cause are only counted (the summary has the totals).
Every line starts with PREFIX.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections import deque
from collections.abc import Callable

from ftenv.report import sdpa
from ftenv.report.attention import AttentionSettings
from ftenv.steps import stats
from ftenv.steps.funasr_log import PHASES
from ftenv.steps.stats import DATA, NEW_SHAPE, NO_SHAPE, SEEN_SHAPE, SlowEvent, Step

PREFIX = "[ftenv-watch]"
#: How long a slow step's line waits for the settings probe started at the first step.
PROBE_WAIT_S = 2.0
#: Steps kept for the summary (the counters in the summary stay exact beyond it).
KEEP_STEPS = 200_000

# Recompilation: with torch.compile on (ftenv finetune --compile turns Dynamo's recompile log on),
# Dynamo logs "Recompiling function ..." when a new shape breaks a compiled graph's guards. A slow
# new-shape step after such lines is put down to recompiling, not to cuDNN.
RECOMPILE = "recompile"
RECOMPILE_MARK = b"Recompiling function"
RECOMPILE_CAUSE = (
    "torch.compile recompiled for this new (batch, padded length): Dynamo logged 'Recompiling "
    "function' just before it, so the compiled graph was specialised to earlier shapes"
)
RECOMPILE_FIX = (
    "keep the compile dynamic over batch and length (ftenv finetune --compile uses dynamic=True; "
    "do not force dynamic=False or mark_static), or pad batches to a few fixed lengths; to rule "
    "it out, run without --compile (FTENV_COMPILE=0)"
)


def _shape_text(step: Step) -> str:
    if step.shape is None:
        return "batch shape unknown"
    novelty = {True: "new to this rank", False: "seen before on this rank", None: "?"}[step.new_shape]
    return f"batch {step.batch} x {step.padded_len} padded tokens ({novelty})"


def _phases_text(step: Step) -> str:
    names = {
        "data_load": "data",
        "forward_time": "forward",
        "backward_time": "backward",
        "optim_time": "optim",
    }
    parts = [f"{names.get(k, k)} {v:.3f}" for k, v in step.phases if k in names]
    return f" ({', '.join(parts)})" if parts else ""


def cause_and_fix(event: SlowEvent, settings: AttentionSettings | None) -> tuple[str, str | None]:
    """Plain words for why this step was slow and what to do."""
    step = event.step
    if event.cause == DATA:
        return (
            f"data loading took {step.data_load:.3f} s of it: the DataLoader did not keep up",
            stats.DATA_FIX,
        )
    if event.cause == SEEN_SHAPE:
        return (
            "its batch shape was seen before on this rank, so it is not a per-shape plan build; "
            "something else held the step (another process on the GPU or CPU, garbage collection, "
            "a synchronising call, I/O)",
            "none known from the log; if it keeps happening, look at `nvidia-smi` and the host load",
        )
    if event.cause == NO_SHAPE:
        return ("the log line carries no batch shape, so the per-shape cause cannot be tested", None)
    if event.cause == RECOMPILE:
        return (RECOMPILE_CAUSE, RECOMPILE_FIX)
    # A new shape.
    fix_var = f"set {sdpa.FIX} in the training process's environment before it starts"
    if os.environ.get("FTENV_IMAGE") and settings is not None and not settings.env.deprioritizes:
        fix_var += " (this image sets it to 1: something overrode it)"
    plan = (
        "cuDNN attention builds a new execution plan for every (batch, padded length) a process has "
        "not seen (about 1 s per new shape on a B200 in the field report), and padded batches always "
        "reach it because transformers passes an explicit attention mask"
    )
    first = settings.cudnn_first if settings is not None else None
    if first:
        why = "cuDNN is first in torch's attention order here"
        if settings.env.state == "prefer-cudnn":
            why += f" ({sdpa.ENV_VAR}=0 asks for it)"
        elif settings.env.state == "ignored":
            why += f" ({sdpa.ENV_VAR}={settings.env.raw!r} is ignored by torch: only 1 works)"
        return (f"{why}; {plan}", fix_var)
    if first is None:
        unknown = ", ".join(settings.unknown_facts()) if settings is not None else "the settings"
        return (
            f"the step is the first with this shape: most likely {plan}; torch does that on "
            f"sm_90/sm_100/sm_103 with torch >= 2.10 and cuDNN > 9.15 unless {sdpa.FIX} "
            f"(not confirmed here: {unknown or 'the rule'} unknown)",
            fix_var,
        )
    return (
        f"the step is the first with this shape, but cuDNN attention is not first here "
        f"({settings.why_not_first()}), so it is another per-shape cost: torch.compile "
        "recompiling, cudnn.benchmark autotuning, or the memory allocator growing for a larger batch",
        "make shapes repeat: pad batches to a few fixed lengths (bucketing); with torch.compile, "
        "mark the sequence dimension dynamic",
    )


def full_line(event: SlowEvent, settings: AttentionSettings | None) -> str:
    step = event.step
    cause, fix = cause_and_fix(event, settings)
    attention = settings.line() if settings is not None else "unknown"
    text = (
        f"{PREFIX} SLOW STEP rank {step.rank} step {step.index}: {step.seconds:.3f} s = "
        f"{event.ratio:.1f}x the running median {event.baseline:.3f} s{_phases_text(step)}; "
        f"{_shape_text(step)}; attention: {attention}. Cause: {cause}. Fix: {fix or 'none known'}."
    )
    if event.earlier_slow:
        text += (
            f" Before it, {event.earlier_slow} earlier steps of rank {step.rank} were as slow "
            f"({event.earlier_slow_new} on new shapes), too early to judge."
        )
    return text


def short_line(event: SlowEvent) -> str:
    step = event.step
    return (
        f"{PREFIX} slow step rank {step.rank} step {step.index}: {step.seconds:.3f} s = "
        f"{event.ratio:.1f}x the running median; {_shape_text(step)}: same cause as above"
    )


class Watcher:
    """Detector + printing policy + what the summary needs. observe() returns the lines to print
    (without newlines). `settings` is called at most once, when the first slow step needs it."""

    def __init__(
        self,
        factor: float = 3.0,
        warmup: int = 3,
        repeat: int = 3,
        settings: Callable[[], AttentionSettings | None] | None = None,
        thresholds: stats.Thresholds | None = None,
    ):
        self.detector = stats.Detector(factor=factor, warmup=warmup)
        self.factor, self.repeat = factor, max(repeat, 1)
        self.thresholds = thresholds or stats.Thresholds()
        self._settings_fn, self._settings, self._probe = settings, None, None
        self.steps: deque[tuple] = deque(maxlen=KEEP_STEPS)
        self.n_steps = 0
        self.val_lines = 0
        self.bad_lines = 0
        self.events: dict[str, list[SlowEvent]] = {}
        self.seen_steps = 0
        self.recompile_lines = 0
        self._recompiled = False  # recompile lines since the last step line

    def note_line(self, line: bytes) -> None:
        """A log line that is not a step line: remember Dynamo's recompile lines for the next step."""
        if RECOMPILE_MARK in line:
            self.recompile_lines += 1
            self._recompiled = True

    def _recompile_cause(self, event: SlowEvent) -> SlowEvent:
        recompiled, self._recompiled = self._recompiled, False
        if recompiled and event.cause == NEW_SHAPE:
            return dataclasses.replace(event, cause=RECOMPILE)
        return event

    @property
    def settings(self) -> AttentionSettings | None:
        """The live settings, read once. prefetch() starts the read early, in a thread, so that
        a slow probe (nvidia-smi on a busy node) never holds the pass-through; a read that has not
        finished 2 s after it is needed counts as unknown."""
        self.prefetch()
        self._probe.join(timeout=PROBE_WAIT_S)
        return self._settings

    def prefetch(self) -> None:
        if self._probe is None:
            self._probe = threading.Thread(target=self._read_settings, daemon=True, name="ftenv-probe")
            self._probe.start()

    def _read_settings(self) -> None:
        try:
            self._settings = self._settings_fn() if self._settings_fn else None
        except Exception:
            self._settings = None

    def observe(self, step: Step) -> list[str]:
        new, event = self.detector.observe(step)
        self._count(step.index, step.seconds, step.batch, step.padded_len, step.rank, new, step.data_load)
        if event is None:
            self._recompiled = False
            return []
        return self._say(self._recompile_cause(event))

    def observe_values(
        self,
        index: int,
        seconds: float,
        batch: int | None,
        padded_len: int | None,
        rank: int,
        phase_values: tuple[float, ...] = (),
    ) -> list[str]:
        """observe() for the watchdog's hot path (ftenv.steps.funasr_log.fast_fields): phase_values are
        FunASR's (data_load, forward_time, backward_time, optim_time); a Step is built only for a
        slow step."""
        new, baseline, earlier, earlier_new = self.detector.judge(rank, seconds, batch, padded_len)
        self._count(index, seconds, batch, padded_len, rank, new, phase_values[0] if phase_values else None)
        if baseline is None:
            self._recompiled = False
            return []
        phases = tuple(zip(PHASES, phase_values, strict=False))
        step = Step(index, seconds, batch, padded_len, rank, new, phases)
        cause = stats.cause_of(step, baseline)
        event = SlowEvent(step, baseline, seconds / baseline, cause, earlier, earlier_new)
        return self._say(self._recompile_cause(event))

    def _count(self, index, seconds, batch, padded_len, rank, new, data_load) -> None:
        if not self.n_steps:  # the trainer is up: read its settings now, off the hot path
            self.prefetch()
        self.n_steps += 1
        self.seen_steps += new is False
        # A plain tuple, not a Step: cheaper to make and to keep (up to KEEP_STEPS of them).
        self.steps.append((index, seconds, batch, padded_len, rank, new, data_load))

    def _say(self, event: SlowEvent) -> list[str]:
        same = self.events.setdefault(event.cause, [])
        same.append(event)
        n = len(same)
        if n == 1:
            return [full_line(event, self.settings)]
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
            tail = f"; {self.seen_steps} steps on shapes seen before, " + (
                f"{seen_slow} of them slow" if seen_slow else "none of them slow"
            )
            return (
                f"{PREFIX} PATTERN: {n} slow steps so far, every one on a batch shape new to its "
                f"rank{tail}: each new (batch, padded length) costs about {each:.2f} s once. "
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
            Step(i, sec, b, p, r, new, (("data_load", d),) if d is not None else ())
            for i, sec, b, p, r, new, d in self.steps
        ]
        return stats.summarize(steps, self.thresholds, self.factor)

    def summary_lines(self, final: bool = True) -> list[str]:
        s = self.summary()
        head = "SUMMARY" if final else "summary so far"
        if not s.n_steps:
            return [f"{PREFIX} {head}: no training step lines seen ({self.val_lines} validation lines)"]
        kept = "" if self.n_steps == len(self.steps) else f" (statistics over the last {len(self.steps)})"
        share = f"{s.slow_on_new} on new shapes" + (
            f" ({100 * s.slow_share_on_new:.0f}%)" if s.slow_steps else ""
        )
        lines = [
            f"{PREFIX} {head}: {self.n_steps} training steps{kept}, ranks "
            f"{','.join(map(str, s.ranks))}, {self.val_lines} validation lines; median {s.median:.3f} s, "
            f"p95 {s.p95:.3f} s, max {s.max:.3f} s, mean {s.mean:.3f} s; {s.n_slow} slow steps "
            f"(>= {self.factor:g}x {s.baseline:.3f} s), {share}; {s.time_lost:.1f} s lost to them; "
            f"mean without them {s.mean_without_slow:.3f} s",
            f"{PREFIX} verdict: {s.verdict}: " + "; ".join(s.reasons[:3]),
        ]
        if s.fix:
            lines.append(f"{PREFIX} fix: {s.fix}")
        return lines
