"""Helpers shared by the tests, so that test files hold tests and import no other test file: here
the repository root, the `ftenv` command run as a user runs it, `ftenv finetune` on the tiny model
and a valid ChatML training record; in this package's modules, stand-ins (trainer, engines, lock
compiler), generated logs and data, and the readers the repository-wide tests check docs and
layout with."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from ftenv import variables

ROOT = Path(__file__).resolve().parents[2]


def run_ftenv(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """`ftenv ARGS...` in a child process (text, both streams captured)."""
    return subprocess.run(
        [sys.executable, "-m", "ftenv.cli", *args], capture_output=True, text=True, timeout=timeout, **kwargs
    )


#: One valid line of the recipe's ChatML JSONL.
GOOD_RECORD = {
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "语音转写：<|startofspeech|>!wav/a.wav<|endofspeech|>"},
        {"role": "assistant", "content": "几点了？"},
    ],
    "speech_length": 145,
    "text_length": 3,
}


def child_env(*, unset: Iterable[str] = (), **extra: str) -> dict[str, str]:
    """This environment with the checkout's scripts/ first on PYTHONPATH (a child runs this ftenv),
    without the variables `unset` names (a name, or a shell pattern such as `SLURM_*`: a child that
    must not see this machine's launcher), then with `extra` set."""
    env = {
        k: v for k, v in variables.environment().items() if not any(fnmatch.fnmatchcase(k, u) for u in unset)
    }
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "scripts"), env.get("PYTHONPATH")) if p)
    return env


def finetune_tiny(tiny: Path, out: Path, *extra: str, env=None, timeout: float = 900):
    """`ftenv finetune` on the tiny model built in `tiny` (one GPU per node asked for), EXTRA after."""
    from ftenv.selfcheck import tinymodel

    p = tinymodel.paths(tiny)
    cmd = [sys.executable, "-m", "ftenv.cli", "finetune", "--model-dir", str(p.root)]
    cmd += ["--train", str(p.train_jsonl), "--valid", str(p.val_jsonl), "--output-dir", str(out)]
    cmd += ["--gpus-per-node", "1", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env or child_env(), timeout=timeout)
