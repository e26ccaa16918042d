"""Step-time statistics: which training steps are slow, whether they are the ones on new batch
shapes, and a verdict. Pure Python (standard library only), no I/O, no torch.

Used by `ftenv watch` (live, through `Detector`), `ftenv analyze` (offline, through `summarize`),
`ftenv.steps.timer` (custom training loops) and the self-check.

The pattern this module is built to name: with cuDNN first in torch's attention order (torch >= 2.10
on sm_90, sm_100, sm_103), every (batch, padded length) that a process has not seen before costs a
cuDNN plan build, so the steps on new shapes take several times longer than the others (the field
report: about 1.05 s against 0.098 s on a B200). A step's shape is "new" when its (batch, padded
length) has not occurred before on the same rank (each process has its own plan cache).

Definitions (the same everywhere in ftenv):
- baseline: the median step time of the steps on shapes already seen (the steady state) when there
  are at least `Thresholds.min_seen` of them, otherwise the median of all steps.
- slow step: a step that takes at least `slow_factor` times the baseline.
- time lost: the sum over slow steps of (step time - baseline).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

# Causes a slow step is put down to, from what one log line can tell.
NEW_SHAPE = "new-shape"  # its (batch, padded length) is new to its rank
SEEN_SHAPE = "seen-shape"  # a shape seen before: not a per-shape cost
DATA = "data"  # most of the extra time is data loading
NO_SHAPE = "no-shape"  # the line carries no batch shape

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"


@dataclass(frozen=True, slots=True)
class Step:
    """One training step of one rank. `seconds` is the step's time (see ftenv.steps.funasr_log for which
    of FunASR's timers it is); `phases` optionally holds the trainer's own split, e.g.
    (("data_load", 0.011), ("forward_time", 0.015), ...)."""

    index: int
    seconds: float
    batch: int | None = None
    padded_len: int | None = None
    rank: int = 0
    new_shape: bool | None = None
    phases: tuple[tuple[str, float], ...] = ()

    @property
    def shape(self) -> tuple[int, int] | None:
        if self.batch is None or self.padded_len is None:
            return None
        return (self.batch, self.padded_len)

    @property
    def data_load(self) -> float | None:
        for name, value in self.phases:
            if name == "data_load":
                return value
        return None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["phases"] = dict(self.phases)
        return d


def mark_new_shapes(steps: Iterable[Step]) -> list[Step]:
    """Per rank, in the given order: new_shape=True on the first occurrence of (batch, padded_len),
    False on later ones, None where the step has no shape."""
    seen: dict[int, set[tuple[int, int]]] = {}
    out = []
    for s in steps:
        shape = s.shape
        if shape is None:
            out.append(replace(s, new_shape=None))
            continue
        rank_seen = seen.setdefault(s.rank, set())
        out.append(replace(s, new_shape=shape not in rank_seen))
        rank_seen.add(shape)
    return out


@dataclass(frozen=True)
class Thresholds:
    """When a run FAILs. Defaults suit a GPU fine-tuning run: the field report's pattern (new-shape
    steps about 10x the others, one step in six slow) fails on the first two; steady 0.1 s steps
    with 5% jitter are far below all three."""

    #: FAIL when median(new-shape steps) / median(seen-shape steps) >= this.
    new_over_seen: float = 3.0
    #: FAIL when the 95th percentile step time / median >= this (more than 5% of steps slow).
    p95_over_median: float = 2.0
    #: FAIL when the slowest step / median >= this (a single huge stall).
    max_over_median: float = 10.0
    #: Steps per rank left out of everything (0: the field report's numbers count every step).
    warmup: int = 0
    #: Fewer steps than this on new (or seen) shapes: the shape comparison is INCONCLUSIVE.
    min_new: int = 3
    min_seen: int = 3


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); values need not be sorted."""
    if not values:
        return math.nan
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def _ratio(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return math.nan
    return a / b


def cause_of(step: Step, baseline: float) -> str:
    """What one slow step is put down to: data loading when the data_load phase holds at least
    half of the extra time, else whether its shape was new to its rank."""
    excess = step.seconds - baseline
    data = step.data_load
    if data is not None and excess > 0 and data >= 0.5 * excess:
        return DATA
    if step.new_shape is None:
        return NO_SHAPE
    return NEW_SHAPE if step.new_shape else SEEN_SHAPE


#: What to do about each verdict reason, in plain words. The per-shape fix names the variable
#: through ftenv.report.sdpa; kept here as text so that this module stays free of imports beyond stdlib.
SHAPE_FIX = (
    "set TORCH_CUDNN_SDPA_DEPRIORITIZED=1 in the training process's environment before it starts "
    "(on sm_90/sm_100/sm_103 with torch >= 2.10 cuDNN attention builds a plan for every new "
    "(batch, padded length)); if it is already 1, the per-shape cost comes from elsewhere "
    "(torch.compile recompiling, cudnn.benchmark autotuning): pad batches to a few fixed lengths"
)
DATA_FIX = (
    "the DataLoader falls behind: raise dataset_conf.num_workers, give the container a larger "
    "/dev/shm (--ipc=host or --shm-size=16g), or move the data to faster storage"
)


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
    fix: str | None
    # Besides what the brief names:
    n_new: int = 0
    n_seen: int = 0
    n_warmup: int = 0
    baseline: float = math.nan
    slow_factor: float = 3.0
    slow_causes: dict[str, int] = field(default_factory=dict)
    ranks: list[int] = field(default_factory=list)
    total_seconds: float = 0.0

    @property
    def n_slow(self) -> int:
        return len(self.slow_steps)

    @property
    def slow_share_on_new(self) -> float:
        return self.slow_on_new / self.n_slow if self.slow_steps else math.nan

    def to_dict(self) -> dict:
        d = asdict(self)
        d["slow_steps"] = [s.to_dict() for s in self.slow_steps]
        d["n_slow"] = self.n_slow
        d["slow_share_on_new"] = self.slow_share_on_new
        # JSON has no NaN: unknown numbers become None.
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def summarize(
    steps: Iterable[Step], thresholds: Thresholds = Thresholds(), slow_factor: float = 3.0
) -> Summary:
    """Statistics and verdict over steps of one or several ranks, each rank's steps in run order.
    Steps whose new_shape is None get it from mark_new_shapes (in the order given)."""
    steps = list(steps)
    if any(s.new_shape is None and s.shape is not None for s in steps):
        steps = mark_new_shapes(steps)
    kept, per_rank = [], {}
    for s in steps:
        per_rank[s.rank] = per_rank.get(s.rank, 0) + 1
        if per_rank[s.rank] > thresholds.warmup:
            kept.append(s)
    n_warmup = len(steps) - len(kept)
    secs = [s.seconds for s in kept]
    new = [s.seconds for s in kept if s.new_shape is True]
    seen = [s.seconds for s in kept if s.new_shape is False]
    median = _median(secs)
    p95 = percentile(secs, 95)
    top = max(secs) if secs else math.nan
    mean = statistics.fmean(secs) if secs else math.nan
    new_median, seen_median = _median(new), _median(seen)
    baseline = seen_median if len(seen) >= thresholds.min_seen else median
    slow = [s for s in kept if not math.isnan(baseline) and s.seconds >= slow_factor * baseline]
    causes: dict[str, int] = {}
    for s in slow:
        c = cause_of(s, baseline)
        causes[c] = causes.get(c, 0) + 1
    slow_ids = {id(s) for s in slow}
    rest = [s.seconds for s in kept if id(s) not in slow_ids]
    summary = Summary(
        n_steps=len(kept),
        median=median,
        p95=p95,
        max=top,
        mean=mean,
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
        n_warmup=n_warmup,
        baseline=baseline,
        slow_factor=slow_factor,
        slow_causes=causes,
        ranks=sorted(per_rank),
        total_seconds=sum(secs),
    )
    _judge(summary, thresholds)
    return summary


def _judge(s: Summary, t: Thresholds) -> None:
    failed, reasons = [], []
    comparable = s.n_new >= max(t.min_new, 1) and s.n_seen >= max(t.min_seen, 1)
    if comparable:
        line = (
            f"steps on shapes new to their rank take {s.new_over_seen:.1f}x the steps on shapes "
            f"already seen (median {s.new_median:.3f} s vs {s.seen_median:.3f} s; FAIL at "
            f"{t.new_over_seen:g}x)"
        )
        if s.new_over_seen >= t.new_over_seen:
            failed.append("shape")
        reasons.append(line)
    elif s.n_steps:
        reasons.append(
            f"too few steps to compare new and seen shapes ({s.n_new} on new shapes, {s.n_seen} on "
            f"seen shapes; at least {t.min_new} and {t.min_seen} needed)"
        )
    else:
        reasons.append("no training steps")
    if s.n_steps:
        line = f"p95 step time is {s.p95_over_median:.1f}x the median (FAIL at {t.p95_over_median:g}x)"
        if s.p95_over_median >= t.p95_over_median:
            failed.append("p95")
        reasons.append(line)
        line = f"slowest step is {s.max_over_median:.1f}x the median (FAIL at {t.max_over_median:g}x)"
        if s.max_over_median >= t.max_over_median:
            failed.append("max")
        reasons.append(line)
    if s.slow_steps:
        reasons.append(
            f"{s.n_slow} slow steps (>= {s.slow_factor:g}x the baseline {s.baseline:.3f} s), "
            f"{s.slow_on_new} of them on new shapes; {s.time_lost:.1f} s lost; mean step "
            f"{s.mean:.3f} s, {s.mean_without_slow:.3f} s without them"
        )
    if failed:
        s.verdict = FAIL
        if "shape" in failed:
            s.fix = SHAPE_FIX
        elif s.slow_causes.get(DATA, 0) * 2 >= max(s.n_slow, 1):
            s.fix = DATA_FIX
    elif comparable:
        s.verdict = PASS
    else:
        s.verdict = INCONCLUSIVE
    s.reasons = reasons


@dataclass(frozen=True)
class SlowEvent:
    """A step the Detector found slow, with what was known at that moment."""

    step: Step
    baseline: float
    ratio: float
    cause: str
    #: Earlier steps of the rank that were as slow but could not be judged yet (warm-up, or a
    #: baseline still dominated by slow steps), and how many on new shapes; first event only.
    earlier_slow: int = 0
    earlier_slow_new: int = 0


class _Window:
    """The last `size` values, kept sorted too, for a running median in O(size) C-level work."""

    __slots__ = ("order", "size", "sorted")

    def __init__(self, size: int):
        self.order: deque[float] = deque()
        self.sorted: list[float] = []
        self.size = size

    def add(self, value: float) -> None:
        self.order.append(value)
        bisect.insort(self.sorted, value)
        if len(self.order) > self.size:
            old = self.order.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]

    def __len__(self) -> int:
        return len(self.sorted)

    def median(self) -> float:
        v, n = self.sorted, len(self.sorted)
        return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


class _Rank:
    __slots__ = ("all", "count", "early", "seen", "seen_shapes")

    def __init__(self, window: int):
        self.seen_shapes: set[tuple[int, int]] = set()
        self.all, self.seen = _Window(window), _Window(window)
        self.count = 0
        self.early: list[tuple[float, bool | None]] | None = []


class Detector:
    """Live detection, step by step, per rank: a step is slow when it takes at least `factor` times
    the running baseline (median of the last `window` non-slow steps on seen shapes once there are
    `min_seen` of them, else of all non-slow steps). No step is judged before a rank has `warmup`
    steps. Shapes are marked new/seen here when the step does not say."""

    def __init__(self, factor: float = 3.0, warmup: int = 3, window: int = 200, min_seen: int = 2):
        if factor <= 1:
            raise ValueError("factor must be > 1")
        self.factor, self.warmup, self.window, self.min_seen = factor, max(warmup, 1), window, min_seen
        self._ranks: dict[int, _Rank] = {}

    def baseline(self, rank: int) -> float | None:
        st = self._ranks.get(rank)
        if st is None:
            return None
        if len(st.seen) >= self.min_seen:
            return st.seen.median()
        if st.count >= self.warmup and len(st.all):
            return st.all.median()
        return None

    def observe(self, step: Step) -> tuple[bool | None, SlowEvent | None]:
        """Whether the step's shape is new to its rank (its own new_shape if set, else worked out
        here; None without a shape), and an event if the step is slow (its step has new_shape)."""
        new, baseline, earlier, earlier_new = self.judge(
            step.rank, step.seconds, step.batch, step.padded_len, step.new_shape
        )
        if baseline is None:
            return new, None
        if new is not step.new_shape:
            step = Step(step.index, step.seconds, step.batch, step.padded_len, step.rank, new, step.phases)
        event = SlowEvent(
            step, baseline, step.seconds / baseline, cause_of(step, baseline), earlier, earlier_new
        )
        return new, event

    def judge(
        self,
        rank: int,
        seconds: float,
        batch: int | None = None,
        padded_len: int | None = None,
        new_shape: bool | None = None,
    ) -> tuple[bool | None, float | None, int, int]:
        """observe() on plain values (the watchdog's hot path builds no Step): (new_shape, the
        baseline when the step is slow else None, earlier_slow, earlier_slow_new)."""
        st = self._ranks.get(rank)
        if st is None:
            st = self._ranks[rank] = _Rank(self.window)
        new = new_shape
        if new is None and batch is not None and padded_len is not None:
            shape = (batch, padded_len)
            new = shape not in st.seen_shapes
            if new:
                st.seen_shapes.add(shape)
        st.count += 1
        baseline = self.baseline(rank) if st.count > self.warmup else None
        early = st.early
        if baseline is not None and baseline > 0 and seconds >= self.factor * baseline:
            earlier = earlier_new = 0
            if early is not None:  # the rank's first slow step: count back over what came before
                for e_seconds, e_new in early:
                    if e_seconds >= self.factor * baseline:
                        earlier += 1
                        earlier_new += e_new is True
                st.early = None
            return new, baseline, earlier, earlier_new
        if new is False:
            st.seen.add(seconds)
        if len(st.seen) < self.min_seen:  # `all` is the baseline only until `seen` has enough
            st.all.add(seconds)
        if early is not None:  # kept until the rank's first event, to count back
            early.append((seconds, new))
            if len(early) > 4 * self.window:
                st.early = None
        return new, None, 0, 0
