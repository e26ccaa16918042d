"""What is not step time (start-up steps and pauses between steps), in words and numbers, so that
the verdicts never count it. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from ftenv.watchdog.step import CHECKPOINT, EPOCH, EPOCH_START, RUN_START, VALIDATION, Step, is_slow

#: (rank, index of the step before the pause, seconds, what the trainer logged in between).
Pause = tuple[int, int, float, tuple[str, ...]]


def account_pauses(steps: Sequence[Step], baseline: float, slow_factor: float) -> tuple[list[Pause], float]:
    """The pauses to show (after a validation or checkpoint save, or at least slow_factor x the
    baseline) and every known pause summed, so that steps + pauses = the trainer's wall clock."""
    previous: dict[int, int] = {}
    shown: list[Pause] = []
    total = 0.0
    for st in steps:
        after = previous.get(st.rank)
        previous[st.rank] = st.index
        if st.pause is None:
            continue
        total += st.pause
        if EPOCH in st.before:
            # FunASR validates and saves at an epoch's end outside train_epoch: no timer holds it.
            continue
        logged = tuple(b for b in st.before if b in (VALIDATION, CHECKPOINT))
        big = is_slow(st.pause, baseline, slow_factor)
        if after is not None and (logged or big):
            shown.append((st.rank, after, st.pause, logged))
    return shown, total


def _plural(n: int, word: str) -> str:
    return f"{word}{'s' if n != 1 else ''}"


def _steps_text(steps: Sequence[object], limit: int = 6) -> str:
    """The first `limit` steps named, then how many more."""
    shown = ", ".join(map(str, steps[:limit]))
    more = len(steps) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def pause_text(pauses: Sequence[Pause]) -> str | None:
    """'N pauses between steps, S s in all (validation at steps ..., checkpoint saves at steps ...,
    K others)', or None without pauses to show; the step named is the one after which the trainer
    paused."""
    if not pauses:
        return None
    val = sorted({i for _, i, _, b in pauses if VALIDATION in b})
    ckpt = sorted({i for _, i, _, b in pauses if CHECKPOINT in b})
    other = sum(1 for *_, b in pauses if not b)
    parts = []
    if val:
        parts.append(f"validation at {_plural(len(val), 'step')} {_steps_text(val)}")
    if ckpt:
        parts.append(f"checkpoint saves at {_plural(len(ckpt), 'step')} {_steps_text(ckpt)}")
    if other:
        parts.append(f"{other} {_plural(other, 'other')}")
    n, secs = len(pauses), sum(sec for _, _, sec, _ in pauses)
    return (
        f"{n} {_plural(n, 'pause')} between steps, {secs:.1f} s in all ({'; '.join(parts)}): "
        "not step time, never a slow step"
    )


def apart_text(apart_steps: Sequence[Step]) -> str | None:
    """'N start-up steps set apart, not judged: ... (steps ...); slowest T s' (just 'steps' when
    some are set apart for another reason than start-up), or None."""
    if not apart_steps:
        return None
    by_reason: dict[str, list[Step]] = {}
    for st in apart_steps:
        by_reason.setdefault(st.apart or "", []).append(st)
    several = len({st.rank for st in apart_steps}) > 1

    def where(group: list[Step]) -> str:
        if several:
            return _steps_text([f"rank {st.rank} step {st.index}" for st in group])
        return f"{_plural(len(group), 'step')} {_steps_text([st.index for st in group])}"

    parts = [f"{len(group)} x {reason} ({where(group)})" for reason, group in by_reason.items()]
    n = len(apart_steps)
    slowest = max(st.seconds for st in apart_steps)
    kind = "start-up " if all(st.apart in (RUN_START, EPOCH_START) for st in apart_steps) else ""
    head = f"{n} {kind}{_plural(n, 'step')} set apart, not judged"
    return f"{head}: {', '.join(parts)}; slowest {slowest:.3f} s"


def wall_clock_text(judged_s: float, apart_steps: Sequence[Step], pause_s: float) -> str | None:
    """How the trainer's time adds up: the judged steps, the start-up steps and the pauses (their
    sum is FunASR's total_time summed over the steps); None when no pause is known."""
    if not pause_s:
        return None
    start_s = sum(st.seconds for st in apart_steps)
    return (
        f"time in all: {judged_s:.1f} s in judged steps + {start_s:.1f} s in start-up steps + "
        f"{pause_s:.1f} s between steps = {judged_s + start_s + pause_s:.1f} s"
    )
