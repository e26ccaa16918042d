"""Helpers shared by the tests: the repository root, the `ftenv` command run as a user runs it,
and (in this package's modules) step-log builders, a stand-in trainer, a lock-compiler stub and
FunASR issue #3704's figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_ftenv(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """`ftenv ARGS...` in a child process (text, both streams captured)."""
    return subprocess.run(
        [sys.executable, "-m", "ftenv.cli", *args], capture_output=True, text=True, timeout=timeout, **kwargs
    )
