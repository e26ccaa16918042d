"""The step model: one training step of one rank, whether its batch shape is new to the rank (each
process has its own cuDNN plan cache), and which steps are set apart as start-up. Standard
library only.
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
#: What the trainer logged between a rank's previous step and this one (Step.before).
EPOCH, VALIDATION, CHECKPOINT = "epoch", "validation", "checkpoint"
#: Why a step is set apart (Step.apart).
RUN_START = "run start"
EPOCH_START = "epoch start"
AFTER_PAUSE = "carries a pause"  # --time total: its time holds a validation or checkpoint save
#: A rank's first steps that are start-up (CUDA and library warm-up).
RUN_STARTUP_STEPS = 1


@dataclass(frozen=True, slots=True)
class Step:
    """One training step of one rank. `seconds` is the step's time (see ftenv.watchdog.funasr_log for
    which of FunASR's timers it is); `phases` optionally holds the trainer's own split, e.g.
    (("data_load", 0.011), ("forward_time", 0.015), ...)."""

    index: int
    seconds: float
    batch: int | None = None
    padded_len: int | None = None
    rank: int = 0
    new_shape: bool | None = None
    phases: tuple[tuple[str, float], ...] = ()
    #: FunASR's step_in_epoch (1 at an epoch's first step), None when the line has none.
    step_in_epoch: int | None = None
    #: total_time minus the phases (seconds between steps), None when not both are known.
    pause: float | None = None
    #: What the trainer logged since the rank's previous step (EPOCH, VALIDATION, CHECKPOINT).
    before: tuple[str, ...] = ()
    #: Why the step is set apart (RUN_START, EPOCH_START, AFTER_PAUSE), None when it is judged.
    apart: str | None = None

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


def is_slow(seconds: float, baseline: float, factor: float) -> bool:
    """The one rule of a slow step (or a pause shown as one), live and offline: at least factor x
    the baseline; a zero baseline (steps logged as 0.000 s) judges nothing slow."""
    return baseline > 0 and seconds >= factor * baseline


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


def note_marker(pending: dict[int, list[str]], kind: str, rank: int) -> None:
    """A trainer's marker line (EPOCH, VALIDATION, CHECKPOINT) for the rank's next step to carry
    (Step.before): each kind once, in the order they came, live and in a saved log alike."""
    kinds = pending.setdefault(rank, [])
    if kind not in kinds:
        kinds.append(kind)


def apart_reason(
    nth: int, step_in_epoch: int | None, before: tuple[str, ...] = (), time_holds_pause: bool = False
) -> str | None:
    """Why a rank's nth step (1-based) is set apart, or None: the one rule, used by the summary
    (mark_apart) and by the live watchdog alike."""
    if nth <= RUN_STARTUP_STEPS:
        return RUN_START
    if EPOCH in before or step_in_epoch == 1:
        return EPOCH_START
    if time_holds_pause and (VALIDATION in before or CHECKPOINT in before):
        return AFTER_PAUSE
    return None


def mark_apart(steps: Iterable[Step], time_holds_pause: bool = False) -> list[Step]:
    """Per rank, in the given order: `apart` set by apart_reason on steps that have none (a step
    already marked keeps its reason). time_holds_pause: the step times are FunASR's total_time."""
    nth: dict[int, int] = {}
    out = []
    for s in steps:
        nth[s.rank] = nth.get(s.rank, 0) + 1
        if s.apart is None:
            why = apart_reason(nth[s.rank], s.step_in_epoch, s.before, time_holds_pause)
            s = s.with_changes(apart=why) if why else s
        out.append(s)
    return out


def waits_text(rank: int) -> str:
    who = "another rank" if rank == ANY_RANK else f"rank {rank}"
    return f"waits for {who}'s new shape (DDP all-reduce)"
