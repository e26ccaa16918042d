"""Live detection of slow steps per rank and what each is put down to (data loading, a new shape, a
wait for another rank's new shape): the engine of the watchdog and the step timer. Standard
library only.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from ftenv.watchdog.step import ANY_RANK, DATA, NEW_SHAPE, NO_SHAPE, SEEN_SHAPE, Step, is_slow
from ftenv.watchdog.thresholds import (
    DATA_SHARE,
    DDP_BACKWARD_SHARE,
    LIVE_MIN_SEEN,
    LIVE_WARMUP,
    SLOW_FACTOR,
    WINDOW,
)

# --- what one slow step is put down to (the live detector and the summary both use this) ---


def is_data_stall(step: Step, baseline: float) -> bool:
    excess = step.seconds - baseline
    data = step.data_load
    return data is not None and excess > 0 and data >= DATA_SHARE * excess


def waits_for(step: Step, baseline: float, new_elsewhere: Iterable[int], use_signature: bool) -> int | None:
    """The rank whose new shape this slow seen-shape step waited for in DDP's all-reduce, ANY_RANK
    when (use_signature) the extra time is in backward_time only, else None. A single-GPU log looks
    like one rank's of a DDP run, so such a stall there is put down to DDP too."""
    if step.new_shape is not False or is_data_stall(step, baseline):
        return None
    others = sorted(r for r in new_elsewhere if r != step.rank)
    if others:
        return others[0]
    if use_signature and _backward_only(step, step.seconds - baseline):
        return ANY_RANK
    return None


def _backward_only(step: Step, excess: float) -> bool:
    """At least DDP_BACKWARD_SHARE of the extra time in backward_time, and forward_time within the
    rest (a stall in both phases is not an all-reduce wait)."""
    backward, forward = step.phase("backward_time"), step.phase("forward_time")
    if backward is None or excess <= 0 or backward < DDP_BACKWARD_SHARE * excess:
        return False
    return forward is None or forward <= (1 - DDP_BACKWARD_SHARE) * excess


def cause_of(step: Step, baseline: float, waits: int | None = None) -> str:
    """What one slow step is put down to: data loading when the data_load phase holds at least
    DATA_SHARE of the extra time, else whether its shape was new to its rank (or it waited for
    another rank's new shape: `waits`, from waits_for)."""
    if is_data_stall(step, baseline):
        return DATA
    if waits is not None:
        return NEW_SHAPE
    if step.new_shape is None:
        return NO_SHAPE
    return NEW_SHAPE if step.new_shape else SEEN_SHAPE


# --- the live detector ----------------------------------------------------------------------


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
    """Judges each step as it comes: slow at `factor` times the running baseline of recent non-slow
    steps, none before a rank has `warmup` steps; keeps which ranks met a new shape at which step
    index, to tell a DDP wait."""

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
        """The SlowEvent for a step classify() found slow (its new_shape set)."""
        waits = waits_for(step, baseline, self._new_at.get(step.index, ()), use_signature=True)
        cause = cause_of(step, baseline, waits)
        return SlowEvent(step, baseline, step.seconds / baseline, cause, earlier, earlier_new, waits)

    def observe(self, step: Step) -> tuple[bool | None, SlowEvent | None]:
        """Whether the step's shape is new to its rank (its own new_shape if set, else worked out
        here; None without a shape), and an event if the step is slow (its step has new_shape).
        A step set apart (step.apart) is never slow."""
        new, baseline, earlier, earlier_new = self.classify(
            step.rank,
            step.seconds,
            step.batch,
            step.padded_len,
            step.new_shape,
            index=step.index,
            apart=step.apart is not None,
        )
        if baseline is None:
            return new, None
        return new, self.event(step.with_changes(new_shape=new), baseline, earlier, earlier_new)

    def classify(
        self,
        rank: int,
        seconds: float,
        batch: int | None = None,
        padded_len: int | None = None,
        new_shape: bool | None = None,
        index: int | None = None,
        apart: bool = False,
    ) -> tuple[bool | None, float | None, int, int]:
        """observe() on plain values (the watchdog's hot path builds no Step): (new_shape, the
        baseline when the step is slow else None, earlier_slow, earlier_slow_new). A step set
        apart (start-up) has its shape noted and is counted, never judged, never in a baseline."""
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
        if apart:
            return new, None, 0, 0
        baseline = self.baseline(rank) if st.count > self.warmup else None
        early = st.early
        if baseline is not None and is_slow(seconds, baseline, self.factor):
            earlier = earlier_new = 0
            if early is not None:  # the rank's first slow step: count back over what came before
                for e_seconds, e_new in early:
                    if is_slow(e_seconds, baseline, self.factor):
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
