"""`ftenv watch` around the real FunASR trainer (funasr-train-ds through torchrun, the self-check's
tiny model, on the CPU): the lines it parses are the trainer's own, not generated ones.

The slow steps are made with the self-check's test aid (ftenv.trainer.stall: attention sleeps 0.5 s the
first time it sees a shape), which imitates cuDNN's per-shape plan build on any machine. This is a
CPU run with an injected stall: it shows the watchdog reads the real trainer's output and tells the
two cases apart, not how a GPU behaves. About 45 s (tiny model build, two short runs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# Plain imports: funasr and torch are in the host venv's lock, and an import error in our own
# modules is a failure, not a reason to skip.
from ftenv import variables
from ftenv.commands.selfcheck import recipe_overrides
from ftenv.selfcheck import mode_recipe, tinymodel
from support import child_env

#: Each test trains the tiny model through the real trainer (tens of seconds).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tiny):
    """The tiny model built once for the whole run (tests/conftest.py), as its paths."""
    return tinymodel.paths(tiny)


def watched_recipe(tiny, out: Path, stall_s: float) -> tuple[int, str]:
    out.mkdir()
    env = child_env(**tinymodel.OFFLINE_ENV, **{variables.FUNASR_CPU_SHIM: "1"})
    # The silence alarm at 10 s at least (5x the longest gap between the trainer's lines): the
    # real trainer's validation rounds, checkpoint saves and epoch starts must never raise it.
    env.update(
        {
            variables.WATCH_SILENCE_MIN_S: "10",
            variables.WATCH_SILENCE_FACTOR: "5",
            variables.WATCH_HANG_LIMIT_S: "0",
        }
    )
    env.pop(variables.TEST_SDPA_STALL_S, None)
    env.pop("TORCH_CUDNN_SDPA_DEPRIORITIZED", None)
    if stall_s:
        env[variables.TEST_SDPA_STALL_S] = str(stall_s)
    cmd = mode_recipe.command(tiny, out, "cpu", 2, recipe_overrides)
    r = subprocess.run(
        # K=4: the stall makes new-shape steps about 8x; a busy shared CPU must not make a clean
        # step look slow.
        [sys.executable, "-m", "ftenv.cli", "watch", "--factor", "4", "--", *cmd],
        env=env,
        cwd=out,
        capture_output=True,
        timeout=600,
    )
    return r.returncode, (r.stdout + r.stderr).decode("utf-8", "replace")


def test_real_trainer_with_a_per_shape_stall_gets_the_hint(tiny, tmp_path):
    rc, text = watched_recipe(tiny, tmp_path / "stalled", 0.5)
    assert rc == 0, text[-3000:]
    lines = text.splitlines()
    full = [i for i, line in enumerate(lines) if line.startswith("[ftenv-watch] SLOW STEP")]
    assert len(full) == 1, text[-3000:]
    i = full[0]
    step = lines[i].split(" step ", 1)[1].split(":", 1)[0]
    assert "train, rank: 0," in lines[i - 1] and f"total step: {step}," in lines[i - 1]
    assert "new to this rank" in lines[i] and "fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in lines[i]
    assert "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in lines[i + 1]  # the explanation under it
    assert "[ftenv-watch] verdict: FAIL" in text
    assert "SILENCE" not in text, text[-3000:]


def test_real_trainer_without_the_stall_is_quiet(tiny, tmp_path):
    rc, text = watched_recipe(tiny, tmp_path / "clean", 0)
    assert rc == 0, text[-3000:]
    assert re.search(
        r"\[ftenv-watch\] SUMMARY: [1-9]\d* training steps, ranks 0, [1-9]\d* validation lines", text
    )
    assert "SLOW STEP" not in text and "PATTERN" not in text, text[-3000:]
    assert "SILENCE" not in text and "Save checkpoint" in text, text[-3000:]
