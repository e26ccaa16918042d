"""How numbers and environment settings are written in every message of ftenv.

Floor 0: the standard library only, no ftenv import, so that every wing can use it. One home for
these spellings keeps the report, the watchdog, the analyzer and the self-check saying the same
thing the same way.
"""

from __future__ import annotations

import math
import shlex


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
