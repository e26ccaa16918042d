"""The self-check's schedule: the (batch, padded length) each step trains on, so that every shape
first appears once (a new shape) and then recurs (seen shapes)."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from ftenv.watchdog.thresholds import SELFCHECK_WARMUP as WARMUP


@dataclass(frozen=True)
class ScheduledStep:
    shape: tuple[int, int]  # (batch, padded token length) of the LLM input
    indices: tuple[int, ...]  # dataset items


def shape_schedule(
    lengths: list[int], n_new: int = 8, recur: int = 3, warmup: int = WARMUP, seed: int = 0
) -> list[ScheduledStep]:
    """Steps whose shapes first appear, then recur.

    lengths[i] is item i's token length. Shape 0 is the largest (batch 3, longest length) and is
    the only shape of the warm-up steps, so that on a GPU the allocator's pool is as large as it
    will need to be before the timed steps. Then each of n_new further shapes appears once (a new
    shape) followed by `recur` steps on shapes introduced so far (seen shapes), in a seeded random
    order. Every batch holds one item of exactly the padded length and shorter ones, so every
    batch is padded and the LLM's attention gets an explicit mask, as in real fine-tuning.
    """
    rng = random.Random(seed)
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(lengths):
        by_len[n].append(i)
    distinct = sorted(by_len)
    padded = [n for n in distinct if n > distinct[0]]  # lengths with something shorter to pad
    if len(padded) < n_new + 1:
        raise ValueError(
            f"the data has {len(padded)} usable distinct lengths, {n_new + 1} are needed: use more "
            "utterances (ftenv tinymodel --n-train) or fewer shapes (--shapes)"
        )
    # n_new + 1 lengths spread over the range, the longest first.
    picks = [padded[round(i * (len(padded) - 1) / n_new)] for i in range(n_new + 1)]
    picks = sorted(set(picks), reverse=True)
    while len(picks) < n_new + 1:  # rounding collided: fill with unused lengths
        picks.append(next(n for n in reversed(padded) if n not in picks))
    shapes = [(3 if i % 2 == 0 else 2, n) for i, n in enumerate(picks)]
    turn: dict[int, int] = defaultdict(int)

    def batch_for(shape: tuple[int, int]) -> ScheduledStep:
        b, n = shape
        longest = by_len[n][turn[n] % len(by_len[n])]
        turn[n] += 1
        shorter = [i for m in distinct if m < n for i in by_len[m]][-(4 * b) :]
        others = []
        for k in range(b - 1):
            others.append(shorter[(turn[-n] + k) % len(shorter)])
        turn[-n] += 1
        return ScheduledStep(shape, (longest, *others))

    steps = [batch_for(shapes[0]) for _ in range(warmup)]
    order = shapes[1:]
    rng.shuffle(order)
    for k, shape in enumerate(order):
        steps.append(batch_for(shape))
        for _ in range(recur):
            steps.append(batch_for(rng.choice(order[: k + 1])))
    return steps
