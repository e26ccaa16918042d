"""benchmarks/compile_speedup.py, the GPU kit's first call, on the CPU: its ranking (the steady step,
never the first step that holds the compile), its gate (each arm on its own estimate: a warm start
runs after a long cold compile), and its code path with the tiny model and Dynamo's `eager` test
backend (a smoke test, not a measurement): the floor's passes, the warm start in a fresh
process, the CUDA-graph arm skipped, the JSON complete; and its "no GPU" exit. Its speed targets are
docs/benchmarks.md's, measured on a GPU only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from benchmarks.matrix import arms
from support import ROOT

SCRIPT = ROOT / "benchmarks" / "compile_speedup.py"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT / "scripts"))


def _arm(name, steady, first, parts=("regional",), **extra) -> dict:
    return (
        {"arm": name, "parts": list(parts), "steady_step_s": steady, "first_step_s": first}
        | {
            "compile_s": max(0.0, first - steady),
            "loss_max_rel_diff": 1e-4,
            "recompiles": 0,
        }
        | extra
    )


def test_the_best_arm_is_ranked_on_the_steady_step_not_on_the_mean_with_the_compile():
    eager = _arm("eager", 0.100, 0.2, parts=()) | {"mean_step_s": 0.1}
    # Started on another arm's caches: short first step, a mean that looks good, a slow steady step.
    cached = _arm("cached", 0.090, 2.0) | {"mean_step_s": 0.135}
    # Cold: a long compile in its mean, the fastest steady step.
    cold = _arm("cold", 0.050, 90.0) | {"mean_step_s": 2.3}
    cold["break_even_steps"] = arms.break_even_steps(cold, eager)  # as a run writes it into its arm
    best = arms.best_arm([eager, cached, cold])
    assert best["arm"] == "cold"
    assert best["x_eager"] == pytest.approx(0.5)
    assert best["break_even_steps"] == 1797  # carried from the arm
    assert arms.break_even_steps(cold, eager) == 1 + -(-(90.0 - 0.2) // 0.05)
    assert arms.break_even_steps(_arm("slow", 0.2, 1.0), eager) is None
    # An arm off eager's losses never wins.
    assert arms.best_arm([eager, cold | {"loss_max_rel_diff": 0.5}, cached])["arm"] == "cached"


def test_the_gate_lets_a_warm_start_run_after_a_long_cold_compile():
    by_name = {a.name: a for a in arms.ARMS}
    done = {
        "eager": _arm("eager", 0.100, 0.3, parts=()),
        "best-guess": _arm("best-guess", 0.060, 180.0, parts=arms.BEST_GUESS),
    }
    left = 60.0  # a 180 s cold compile ran; a minute is left
    assert arms.refusal(by_name["warm"], done, 40, left, start_s=15.0) is None
    assert arms.refusal(by_name["regional+audio"], done, 40, left) is None
    assert arms.refusal(by_name["floor-best"], done, 40, left) is None
    # A cold arm whose compile does not fit is refused, and says why.
    why = arms.refusal(by_name["decoder"], done, 40, left)
    assert why and why.startswith("not run: needs about")
    # A measured cold compile of the same parts replaces the prior.
    assert arms.compile_estimate(arms.Arm("again", arms.BEST_GUESS), done) == pytest.approx(180.0 - 0.06)


@pytest.mark.slow
def test_the_matrix_runs_its_arms_on_a_cpu(tmp_path):
    out = tmp_path / "matrix.json"
    # Dynamo's test backend: the same graphs, guards and recompiles, no AOT or kernel compile.
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny-model", "--backend", "eager"]
    cmd += ["--steps", "4", "--warmup", "1", "--min-batch", "2", "--max-batch", "3", "--budget-s", "5000"]
    cmd += ["--train-items", "32"]  # the default 256 take minutes to build on a small CPU
    cmd += ["--only", "floor-eager,best-guess,floor-best,warm,+buckets+graphs", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    arms = {a["arm"]: a for a in result["arms"]}
    assert list(arms) == ["eager", "floor-eager", "best-guess", "floor-best", "warm", "+buckets+graphs"]
    assert arms["+buckets+graphs"]["status"] == "skipped: CUDA graphs need a CUDA GPU"
    best = arms["best-guess"]
    assert best["status"] == "ran" and best["steps"] == 4 and best["compiled_calls"] > 0
    assert best["recompiles"] <= 2 and best["validation_graphs"] is not None
    assert best["loss_max_rel_diff"] <= 1e-6 and len(best["val_losses"]) == 3
    for key in ("steady_step_s", "first_step_s", "compile_s", "graph_breaks"):
        assert best[key] is not None, key
    # The floor: eager's and the best arm's passes (CPU: a step's ATen ops and host syncs by the one
    # definition, tests/benchmarks/test_step_count.py; no kernels, no GPU time: a GPU's only).
    assert arms["floor-best"]["profile_of"] == "best-guess" and arms["floor-eager"]["profile_of"] == "eager"
    for name in ("floor-eager", "floor-best"):
        f = arms[name]
        assert f["steps"] == 3 and f["ops_per_step"] > 0 and f["optimizer_ops_per_step"] > 0
        assert f["kernels_per_step"] is None and f["gpu_busy_s_per_step"] is None
    assert arms["floor-best"]["host_syncs_per_step"] < arms["floor-eager"]["host_syncs_per_step"]
    assert result["floor"]["floor_s"] is None and result["floor"]["best"] == arms["floor-best"]
    # The warm start: a fresh process on best-guess's caches, eager's losses.
    warm = arms["warm"]
    assert warm["status"] == "ran" and warm["fresh_process"] and warm["warm_start"]
    assert warm["loss_max_rel_diff"] <= 1e-6
    assert result["best"]["arm"] == "best-guess" and result["partial"] is False
    assert "| +buckets+graphs | - |" in proc.stdout and "not a measurement" in proc.stdout


def test_the_matrix_says_no_gpu_on_a_cpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: run benchmarks/compile_speedup.py itself")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=_env(), timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA GPU visible" in proc.stdout
