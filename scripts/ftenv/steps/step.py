"""The step model: one training step of one rank, whether its batch shape is new to the rank, and
what a slow step is put down to. Standard library only.

A step's shape is "new" when its (batch, padded length) has not occurred before on the same rank
(each process has its own cuDNN plan cache). In DDP every rank waits for the slowest one in the
gradient all-reduce, so a rank that meets a new shape makes the others' step slow too, on a shape
they have seen, with the extra time in backward_time only: such a step "waits for rank R's new
shape" and counts with the new-shape cause.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

# Causes a slow step is put down to, from what the log can tell.
NEW_SHAPE = "new-shape"  # its (batch, padded length) is new to its rank, or it waits for one (DDP)
SEEN_SHAPE = "seen-shape"  # a shape seen before: not a per-shape cost
DATA = "data"  # most of the extra time is data loading
NO_SHAPE = "no-shape"  # the line carries no batch shape
RECOMPILE = "recompile"  # a new shape right after Dynamo logged a recompile (torch.compile on)
#: waits_for() when the rank with the new shape is not in the log (one rank logged).
ANY_RANK = -1


@dataclass(frozen=True, slots=True)
class Step:
    """One training step of one rank. `seconds` is the step's time (see ftenv.steps.funasr_log for
    which of FunASR's timers it is); `phases` optionally holds the trainer's own split, e.g.
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

    def phase(self, name: str) -> float | None:
        for key, value in self.phases:
            if key == name:
                return value
        return None

    @property
    def data_load(self) -> float | None:
        return self.phase("data_load")

    def with_changes(self, **changes) -> Step:
        """A copy with some fields changed (the one way steps are rebuilt)."""
        return replace(self, **changes)

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
            out.append(s.with_changes(new_shape=None))
            continue
        rank_seen = seen.setdefault(s.rank, set())
        out.append(s.with_changes(new_shape=shape not in rank_seen))
        rank_seen.add(shape)
    return out


def waits_text(rank: int) -> str:
    who = "another rank" if rank == ANY_RANK else f"rank {rank}"
    return f"waits for {who}'s new shape (DDP all-reduce)"
