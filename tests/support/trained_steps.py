"""The training steps a real FunASR run logged (funasr/train_utils/trainer_ds.py's step line), per
rank: to check that a stopped and resumed epoch trained each of its steps once."""

from __future__ import annotations

import re

STEP = re.compile(
    r"train, rank: (\d+), epoch: (\d+)/\d+, data_slice: \d+/\d+, "
    r"step_in_slice: \d+/(\d+), step_in_epoch: (\d+),"
)


def steps_of(log: str, rank: int = 0) -> list[int]:
    """step_in_epoch of each step line of that rank, in the order logged."""
    return [int(m.group(4)) for m in STEP.finditer(log) if int(m.group(1)) == rank]


def epoch_length(log: str) -> int:
    """The number of steps in an epoch, as the first step line gives it."""
    m = STEP.search(log)
    assert m, log[-3000:]
    return int(m.group(3))
