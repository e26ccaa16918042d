"""benchmarks/compile_speedup.py, the GPU kit's first call, on the CPU: its code path with the tiny
model and the `aot_eager` backend (a smoke test, not a measurement), the CUDA-graph arm skipped,
and its "no GPU" exit. Its speed targets are docs/benchmarks.md's, measured on a GPU only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from support import ROOT

SCRIPT = ROOT / "benchmarks" / "compile_speedup.py"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT / "scripts"))


def test_the_matrix_runs_its_arms_on_a_cpu_and_skips_the_cuda_graph_arm(tmp_path):
    out = tmp_path / "matrix.json"
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny-model", "--backend", "aot_eager"]
    cmd += ["--steps", "3", "--warmup", "1", "--min-batch", "2", "--max-batch", "3"]
    cmd += ["--only", "regional,+buckets+graphs,+log_interval=50", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    arms = {a["arm"]: a for a in result["arms"]}
    assert list(arms) == ["eager", "regional", "+buckets+graphs", "+log_interval=50"]
    assert arms["+log_interval=50"]["status"] == "ran" and arms["+log_interval=50"]["log_interval"] == 50
    assert arms["+buckets+graphs"]["status"] == "skipped: CUDA graphs need a CUDA GPU"
    regional = arms["regional"]
    assert regional["status"] == "ran" and regional["steps"] == 3
    assert regional["recompiles"] <= 2 and regional["loss_max_rel_diff"] <= 1e-6
    assert regional["compiled_calls"] > 0
    assert result["best"]["arm"] in ("regional", "+log_interval=50")
    assert result["bucketed_shapes"] <= result["shapes"]
    assert "| +buckets+graphs | - |" in proc.stdout and "not a measurement" in proc.stdout


def test_the_matrix_says_no_gpu_on_a_cpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: run benchmarks/compile_speedup.py itself")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=_env(), timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA GPU visible" in proc.stdout
