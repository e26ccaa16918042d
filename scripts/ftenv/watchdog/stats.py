"""Step-time statistics and the verdict (PASS/FAIL/INCONCLUSIVE): which steps are slow and whether
they are the ones on new batch shapes, the pattern of FunASR issue #3704. Pure Python, no I/O, no
torch, so that every caller judges a run the same way (definitions: docs/watchdog.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from ftenv.attention.sdpa import DeprioritizedSetting
from ftenv.outcome import FAIL, INCONCLUSIVE, PASS
from ftenv.watchdog.detector import cause_of, waits_for
from ftenv.watchdog.fixes import DATA_LOADER_FIX, Fix, shape_fix
from ftenv.watchdog.not_step_time import account_pauses
from ftenv.watchdog.step import DATA, NEW_SHAPE, Step, is_slow, mark_new_shapes
from ftenv.watchdog.thresholds import DATA_SHARE, SLOW_FACTOR, Thresholds

DEFAULT_THRESHOLDS = Thresholds()
#: How a rule that held is shown under a FAIL (the failed ones come first, unmarked).
PASSED = "passed: "


def percentile(values: Sequence[float], q: int) -> float:
    """Linear interpolation between closest ranks (numpy's default), q an integer 1..99."""
    if not values:
        return math.nan
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def _ratio(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return math.nan
    return a / b


@dataclass
class Summary:
    n_steps: int
    median: float
    p95: float
    max: float
    mean: float
    new_median: float
    seen_median: float
    new_over_seen: float
    p95_over_median: float
    max_over_median: float
    slow_steps: list[Step]
    slow_on_new: int
    time_lost: float
    mean_without_slow: float
    verdict: str
    reasons: list[str]
    fix: str | None  # the fix in full
    n_new: int = 0
    n_seen: int = 0
    n_warmup: int = 0
    baseline: float = math.nan
    slow_factor: float = SLOW_FACTOR
    slow_causes: dict[str, int] = field(default_factory=dict)
    ranks: list[int] = field(default_factory=list)
    total_seconds: float = 0.0
    #: Slow steps on seen shapes that waited for another rank's new shape (DDP), counted with the
    #: new-shape cause: (rank, step index) -> the rank waited for (ANY_RANK: not in the log).
    waits: dict[tuple[int, int], int] = field(default_factory=dict)
    #: Steps set apart (Step.apart says why: start-up, or a pause held in the step time), in run order.
    apart_steps: list[Step] = field(default_factory=list)
    #: Pauses shown: (rank, index of the step before the pause, seconds, what the trainer logged).
    pauses: list[tuple[int, int, float, tuple[str, ...]]] = field(default_factory=list)
    #: Every known pause summed (steps + pauses = the trainer's wall clock between its first and
    #: last step line).
    pause_seconds: float = 0.0
    #: The rules that failed and those that held, each a sentence; `context` (why a rule could
    #: not be applied) and `notes` (the slow steps) are not rules.
    failed_rules: list[str] = field(default_factory=list)
    passed_rules: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The fix in a few words (the verdicts print it first, the full `fix` below it).
    fix_short: str | None = None

    @property
    def n_slow(self) -> int:
        return len(self.slow_steps)

    @property
    def n_apart(self) -> int:
        return len(self.apart_steps)

    @property
    def slow_waiting(self) -> int:
        return len(self.waits)

    @property
    def slow_share_on_new(self) -> float:
        """The share of slow steps put down to new shapes (their own, or another rank's)."""
        return (self.slow_on_new + self.slow_waiting) / self.n_slow if self.slow_steps else math.nan

    def waits_of(self, step: Step) -> int | None:
        return self.waits.get((step.rank, step.index))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["slow_steps"] = [s.to_dict() for s in self.slow_steps]
        d["apart_steps"] = [s.to_dict() for s in self.apart_steps]
        d["pauses"] = [
            {"rank": r, "after_step": i, "seconds": sec, "before": list(b)} for r, i, sec, b in self.pauses
        ]
        d["n_slow"] = self.n_slow
        d["n_apart"] = self.n_apart
        d["slow_share_on_new"] = self.slow_share_on_new
        d["waits"] = [{"rank": r, "step": i, "waits_for": w} for (r, i), w in self.waits.items()]
        d["slow_waiting"] = self.slow_waiting
        # JSON has no NaN: unknown numbers become None.
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def _ddp_waits(slow: list[Step], steps: list[Step], baseline: float, ranks: set[int]) -> dict:
    new_at: dict[int, set[int]] = {}
    for s in steps:
        if s.new_shape:
            new_at.setdefault(s.index, set()).add(s.rank)
    waits = {}
    for s in slow:
        w = waits_for(s, baseline, new_at.get(s.index, ()), use_signature=len(ranks) == 1)
        if w is not None:
            waits[(s.rank, s.index)] = w
    return waits


def summarize(
    steps: Iterable[Step],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    slow_factor: float = SLOW_FACTOR,
    deprioritized: DeprioritizedSetting | None = None,
    compiled: tuple[str, ...] | None = None,
    cudnn_first: bool | None = None,
) -> Summary:
    """Statistics and verdict over steps of one or several ranks, each rank's steps in run order.
    Steps with `apart` set are counted apart: only the source of the steps knows where a run or an
    epoch starts. `deprioritized`, `compiled` and `cudnn_first`, when known, pick the per-shape fix."""
    steps = list(steps)
    if any(s.new_shape is None and s.shape is not None for s in steps):
        steps = mark_new_shapes(steps)
    kept, apart, per_rank, warm = [], [], {}, 0
    for s in steps:
        per_rank[s.rank] = per_rank.get(s.rank, 0) + 1
        if per_rank[s.rank] <= thresholds.warmup:
            warm += 1
        elif s.apart:
            apart.append(s)
        else:
            kept.append(s)
    secs = [s.seconds for s in kept]
    new = [s.seconds for s in kept if s.new_shape is True]
    seen = [s.seconds for s in kept if s.new_shape is False]
    median, p95 = _median(secs), percentile(secs, 95)
    top = max(secs) if secs else math.nan
    new_median, seen_median = _median(new), _median(seen)
    baseline = seen_median if len(seen) >= thresholds.min_seen else median
    slow = [s for s in kept if is_slow(s.seconds, baseline, slow_factor)]
    waits = _ddp_waits(slow, steps, baseline, set(per_rank))
    causes: dict[str, int] = {}
    for s in slow:
        c = cause_of(s, baseline, waits.get((s.rank, s.index)))
        causes[c] = causes.get(c, 0) + 1
    slow_ids = {id(s) for s in slow}
    rest = [s.seconds for s in kept if id(s) not in slow_ids]
    summary = Summary(
        n_steps=len(kept),
        median=median,
        p95=p95,
        max=top,
        mean=statistics.fmean(secs) if secs else math.nan,
        new_median=new_median,
        seen_median=seen_median,
        new_over_seen=_ratio(new_median, seen_median),
        p95_over_median=_ratio(p95, median),
        max_over_median=_ratio(top, median),
        slow_steps=slow,
        slow_on_new=sum(1 for s in slow if s.new_shape is True),
        time_lost=sum(s.seconds - baseline for s in slow),
        mean_without_slow=statistics.fmean(rest) if rest else math.nan,
        verdict=INCONCLUSIVE,
        reasons=[],
        fix=None,
        n_new=len(new),
        n_seen=len(seen),
        n_warmup=warm,
        baseline=baseline,
        slow_factor=slow_factor,
        slow_causes=causes,
        ranks=sorted(per_rank),
        total_seconds=sum(secs),
        waits=waits,
        apart_steps=apart,
    )
    summary.pauses, summary.pause_seconds = account_pauses(steps, baseline, slow_factor)
    _apply_rules(summary, thresholds, shape_fix(deprioritized, compiled, cudnn_first))
    return summary


def reasons_for(s: Summary, failing: bool) -> list[str]:
    """The verdict's reasons: under a FAIL (`failing`, which may come from elsewhere, e.g. the
    self-check's own checks) the failed rules first, then the passed ones marked PASSED; else the
    rules as they are. Notes come last."""
    if failing:
        return [*s.failed_rules, *(PASSED + r for r in s.passed_rules), *s.context, *s.notes]
    return [*s.context, *s.passed_rules, *s.notes]


def on_new_text(s: Summary, on_new: str) -> str:
    """How many slow steps are on new shapes (`on_new` words it), how many waited for another
    rank's (DDP) and their share, as the watchdog's summary and `ftenv analyze` print it."""
    waiting = f", {s.slow_waiting} waiting for another rank's new shape (DDP)" if s.slow_waiting else ""
    share = f" ({100 * s.slow_share_on_new:.0f}%)" if s.slow_steps else ""
    return f"{s.slow_on_new} {on_new}{waiting}{share}"


def fix_lines(s: Summary, mark: str, indent: str) -> list[str]:
    """The verdict's fix as the watchdog and `ftenv analyze` print it: `fix:` and its few words, the
    full text indented below them; nothing without a fix."""
    if not s.fix:
        return []
    return [f"{mark}fix: {s.fix_short or s.fix}", *([f"{indent}{s.fix}"] if s.fix_short else [])]


def _apply_rules(s: Summary, t: Thresholds, per_shape: Fix) -> None:
    failed: list[str] = []

    def rule(name: str, line: str, fails: bool) -> None:
        (s.failed_rules if fails else s.passed_rules).append(line)
        if fails:
            failed.append(name)

    comparable = s.n_new >= max(t.min_new, 1) and s.n_seen >= max(t.min_seen, 1)
    if comparable:
        line = (
            f"steps on shapes new to their rank take {s.new_over_seen:.1f}x the steps on shapes "
            f"already seen (median {s.new_median:.3f} s vs {s.seen_median:.3f} s; FAIL at "
            f"{t.new_over_seen:g}x)"
        )
        rule("shape", line, s.new_over_seen >= t.new_over_seen)
    elif s.n_steps:
        s.context.append(
            f"too few steps to compare new and seen shapes ({s.n_new} on new shapes, {s.n_seen} on "
            f"seen shapes; at least {t.min_new} and {t.min_seen} needed)"
        )
    else:
        s.context.append("no training steps")
    if s.n_steps:
        line = f"p95 step time is {s.p95_over_median:.1f}x the median (FAIL at {t.p95_over_median:g}x)"
        rule("p95", line, s.p95_over_median >= t.p95_over_median)
        line = f"slowest step is {s.max_over_median:.1f}x the median (FAIL at {t.max_over_median:g}x)"
        rule("max", line, s.max_over_median >= t.max_over_median)
    if s.slow_steps:
        waiting = (
            f" and {s.slow_waiting} waiting for another rank's new shape (DDP all-reduce)"
            if s.slow_waiting
            else ""
        )
        s.notes.append(
            f"{s.n_slow} slow steps (>= {s.slow_factor:g}x the baseline {s.baseline:.3f} s), "
            f"{s.slow_on_new} of them on new shapes{waiting}; {s.time_lost:.1f} s lost; mean step "
            f"{s.mean:.3f} s, {s.mean_without_slow:.3f} s without them"
        )
    if failed:
        s.verdict = FAIL
        if "shape" in failed or (s.slow_waiting and s.slow_causes.get(NEW_SHAPE, 0) >= DATA_SHARE * s.n_slow):
            s.fix_short, s.fix = per_shape.short, per_shape.full
        elif s.slow_causes.get(DATA, 0) >= DATA_SHARE * max(s.n_slow, 1):
            s.fix_short, s.fix = DATA_LOADER_FIX.short, DATA_LOADER_FIX.full
    elif comparable:
        s.verdict = PASS
    else:
        s.verdict = INCONCLUSIVE
    s.reasons = reasons_for(s, s.verdict == FAIL)
