"""How numbers, environment settings and Markdown tables are written in every message of ftenv.

Floor 0: the standard library only, no ftenv import, so that every wing can use it. One home for
these spellings keeps the report, the watchdog, the analyzer and the self-check saying the same
thing the same way.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Collection, Iterable, Sequence


def number(x: float | None, digits: int = 3, unit: str = "", missing: str = "n/a") -> str:
    """x with `digits` decimals and a unit suffix (" s", "x"); `missing` where x is None or NaN,
    which is how ftenv says "not measured" (a median of no steps, a ratio to an unknown baseline)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    return f"{x:.{digits}f}{unit}"


def assignment(name: str, value: str | None) -> str:
    """NAME=value as a shell reads it, quoted only where needed (`NAME=''`, `NAME=' 1'`), or
    "NAME unset": what a user pastes back must set exactly the value that was seen."""
    if value is None:
        return f"{name} unset"
    return f"{name}={shlex.quote(value)}"


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], right: Collection[int] = ()
) -> list[str]:
    """A Markdown table's lines: the header, its rule (the columns numbered in `right` aligned right),
    one line per row with each cell as str() writes it. One spelling for every table ftenv writes
    (summary.md, the model card); escaping a cell's `|` is the caller's, who knows what cells hold."""
    rule = "|" + "".join("---:|" if i in right else "---|" for i in range(len(header)))
    return [_table_row(header), rule, *(_table_row(row) for row in rows)]


def _table_row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"
