"""FunASR's silent data losses during a run: the `[ftenv-data]` line's one home, its parser and the
rule that fails a run losing too much training data (events and rule: docs/data.md).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

MARK = "[ftenv-data]"
#: More than 1% of the training data not trained as listed fails the run (docs/watchdog.md).
MAX_LOSS_SHARE = 0.01
SUBSTITUTED, LOST, DROPPED_BATCH, EMPTY_BATCH, DROPPED_INDEX, DROPPED_SAMPLER = (
    "substituted",
    "lost",
    "dropped_batch",
    "empty_batch",
    "dropped_index",
    "dropped_sampler",
)
#: Events counted per sample as they happen (summed), and per set (every rank reports the same:
#: the largest is kept).
PER_SAMPLE = (SUBSTITUTED, LOST, DROPPED_BATCH, EMPTY_BATCH)
PER_SET = (DROPPED_INDEX, DROPPED_SAMPLER)


def never_trained_share(never: int, lines: int) -> float:
    """The share of a training set's lines that never train (index and sampler skips): the quantity
    the limit is on, whether counted at run time (here) or predicted before it (`ftenv data check`)."""
    return never / lines if lines else 0.0


def too_many_never_trained(share: float) -> bool:
    """The limit on that share: above it the run fails, or `ftenv data check` refuses to start it."""
    return share > MAX_LOSS_SHARE


_LINE = re.compile(
    rb"\[ftenv-data\] event: (\w+), rank: (\d+), set: (\w+), count: (\d+), of: (\d+)(?:, detail: (.*))?"
)


def event_line(event: str, rank: int | str, dataset: str, count: int, of: int = 0, detail: str = "") -> str:
    """The line the trainer entry prints for an event (no newline)."""
    tail = f", detail: {' '.join(detail.split())[:300]}" if detail else ""
    return f"{MARK} event: {event}, rank: {rank}, set: {dataset}, count: {count}, of: {of}{tail}"


def parse(line: bytes) -> tuple[str, int, str, int, int, str] | None:
    """(event, rank, set, count, of, detail) of an event line, else None."""
    m = _LINE.search(line)
    if m is None:
        return None
    event, rank, dataset, count, of, detail = m.groups()
    detail_text = (detail or b"").decode("utf-8", "replace").strip()
    return event.decode(), int(rank), dataset.decode(), int(count), int(of), detail_text


@dataclass
class DataLossTally:
    """What the watchdog has read; `served` is fed with each training step's batch size."""

    served: int = 0
    samples: Counter = field(default_factory=Counter)  # (set, event) -> count
    per_set: dict = field(default_factory=dict)  # (set, event) -> (count, of)
    example: dict = field(default_factory=dict)  # event -> first detail

    def observe(self, line: bytes) -> None:
        """Count an event line; any other line counts nothing."""
        parsed = parse(line)
        if parsed is None:
            return
        event, _rank, dataset, count, of, detail = parsed
        if event in PER_SET:
            if count >= self.per_set.get((dataset, event), (-1, 0))[0]:
                self.per_set[(dataset, event)] = (count, of)
        else:
            self.samples[(dataset, event)] += count
        if detail and event not in self.example:
            self.example[event] = detail

    def any(self) -> bool:
        return bool(self.samples) or any(c for c, _ in self.per_set.values())

    def runtime_share(self, dataset: str = "train") -> float:
        bad = sum(self.samples[(dataset, e)] for e in (SUBSTITUTED, LOST, DROPPED_BATCH))
        whole = self.served + self.samples[(dataset, LOST)] + self.samples[(dataset, DROPPED_BATCH)]
        return bad / max(whole, bad) if bad else 0.0  # no step line read: every sample counted was bad

    def set_share(self, dataset: str = "train") -> float:
        index, lines = self.per_set.get((dataset, DROPPED_INDEX), (0, 0))
        sampler, indexed = self.per_set.get((dataset, DROPPED_SAMPLER), (0, 0))
        return never_trained_share(index + sampler, lines or indexed)

    def failed(self) -> bool:
        return (
            self.runtime_share() > MAX_LOSS_SHARE
            or too_many_never_trained(self.set_share())
            or self.samples[("train", EMPTY_BATCH)] + self.samples[("valid", EMPTY_BATCH)] > 0
        )

    def summary_lines(self, prefix: str) -> list[str]:
        """The watchdog's closing lines about the data (none when nothing was lost)."""
        if not self.any():
            return []
        out = []
        for dataset in ("train", "valid"):
            counts = {e: self.samples[(dataset, e)] for e in PER_SAMPLE if self.samples[(dataset, e)]}
            counts |= {
                e: self.per_set[(dataset, e)][0] for e in PER_SET if self.per_set.get((dataset, e), (0,))[0]
            }
            if counts:
                parts = ", ".join(f"{e} {n}" for e, n in counts.items())
                out.append(f"{prefix} data ({dataset}): FunASR silently {parts}")
        share, set_share = self.runtime_share(), self.set_share()
        verdict = "FAIL" if self.failed() else "within the limit"
        out.append(
            f"{prefix} data: {share:.1%} of the {self.served} training samples served were substitutes, "
            f"lost or dropped, {set_share:.1%} of the training lines never train; {verdict} (limit "
            f"{MAX_LOSS_SHARE:.0%}, and no empty batch); `ftenv data check` lists the lines"
        )
        for event, detail in sorted(self.example.items()):
            out.append(f"{prefix}   e.g. {event}: {detail}")
        return out
