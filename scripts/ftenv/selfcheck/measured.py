"""What one self-check mode hands the verdict (ftenv.selfcheck.verdict)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ftenv.watchdog import thresholds
from ftenv.watchdog.step import Step


@dataclass
class Measured:
    """What one self-check mode measured: its timed steps and thresholds, what goes into the result
    as is (`extra`: environment, losses, the compile figures ...), and the mode's own findings that
    the verdict adds to the step-time ones (the compiled mode's recompiles and losses)."""

    mode: str
    steps: list[Step]
    thresholds: thresholds.Thresholds
    extra: dict = field(default_factory=dict)
    fails: list[str] = field(default_factory=list)  # FAIL reasons of the mode's own checks
    unsure: list[str] = field(default_factory=list)  # INCONCLUSIVE reasons of the mode's own checks
    fix: str | None = None  # the fix for `fails`, before the step-time fix
    default_fix: str | None = None  # the fix for `fails` when neither names one
