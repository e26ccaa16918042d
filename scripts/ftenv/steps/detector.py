"""Live detection of slow steps, step by step, per rank (the watchdog's and the step timer's
engine). Standard library only; the definitions are those of ftenv.steps.stats."""

from __future__ import annotations

import bisect
from collections import OrderedDict, deque
from dataclasses import dataclass

from ftenv.steps.model import Step, cause_of, waits_for
from ftenv.steps.thresholds import LIVE_MIN_SEEN, LIVE_WARMUP, SLOW_FACTOR, WINDOW


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
    #: The rank whose new shape this step waited for (DDP), ANY_RANK if not logged, else None.
    waits: int | None = None


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
    """A step is slow when it takes at least `factor` times the running baseline (median of the
    last `window` non-slow steps on seen shapes once there are `min_seen` of them, else of all
    non-slow steps). No step is judged before a rank has `warmup` steps. Shapes are marked
    new/seen here when the step does not say; which ranks met a new shape at which step index is
    kept (for the last `window` indices) to tell a DDP wait."""

    def __init__(
        self,
        factor: float = SLOW_FACTOR,
        warmup: int = LIVE_WARMUP,
        window: int = WINDOW,
        min_seen: int = LIVE_MIN_SEEN,
    ):
        if factor <= 1:
            raise ValueError("factor must be > 1")
        self.factor, self.warmup, self.window, self.min_seen = factor, max(warmup, 1), window, min_seen
        self._ranks: dict[int, _Rank] = {}
        self._new_at: OrderedDict[int, set[int]] = OrderedDict()

    def baseline(self, rank: int) -> float | None:
        st = self._ranks.get(rank)
        if st is None:
            return None
        if len(st.seen) >= self.min_seen:
            return st.seen.median()
        if st.count >= self.warmup and len(st.all):
            return st.all.median()
        return None

    def event(self, step: Step, baseline: float, earlier: int = 0, earlier_new: int = 0) -> SlowEvent:
        """The SlowEvent for a step judge() found slow (its new_shape set)."""
        waits = waits_for(step, baseline, self._new_at.get(step.index, ()), use_signature=True)
        cause = cause_of(step, baseline, waits)
        return SlowEvent(step, baseline, step.seconds / baseline, cause, earlier, earlier_new, waits)

    def observe(self, step: Step) -> tuple[bool | None, SlowEvent | None]:
        """Whether the step's shape is new to its rank (its own new_shape if set, else worked out
        here; None without a shape), and an event if the step is slow (its step has new_shape)."""
        new, baseline, earlier, earlier_new = self.judge(
            step.rank, step.seconds, step.batch, step.padded_len, step.new_shape, index=step.index
        )
        if baseline is None:
            return new, None
        return new, self.event(step.with_changes(new_shape=new), baseline, earlier, earlier_new)

    def judge(
        self,
        rank: int,
        seconds: float,
        batch: int | None = None,
        padded_len: int | None = None,
        new_shape: bool | None = None,
        index: int | None = None,
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
        if new and index is not None:
            self._new_at.setdefault(index, set()).add(rank)
            if len(self._new_at) > self.window:
                self._new_at.popitem(last=False)
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
