"""benchmarks/sdpa_nan_repro.py, the GPU kit's NaN reproducer, on the CPU: its cases meet the public
reports' conditions, it says "unknown" and exits 3 where cuDNN attention cannot run, its predictions
follow the report's cuDNN threshold, and the kit's `sdpa-nan` step around it (a stand-in script plays
the GPU run)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest

from ftenv import outcome
from ftenv.attention import sdpa
from imagetools.gpukit import gpu_run, gpu_steps, gpu_variant_steps
from support import ROOT

SCRIPT = ROOT / "benchmarks" / "sdpa_nan_repro.py"
H200 = (9, 0)


@pytest.fixture(scope="module")
def repro():
    spec = importlib.util.spec_from_file_location("sdpa_nan_repro", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _case(repro, source, **kw):
    return next(
        c for c in repro.CASES if c.source == source and all(getattr(c, k) == v for k, v in kw.items())
    )


def test_the_cases_meet_the_reports_conditions(repro):
    """pytorch#196678: a mask, seq_len % 128 == 64, every row's log-sum-exp below ln(FLT_MAX) = -88.7,
    and a control at a multiple of 128; cudnn-frontend#1072: Sq=1, Sk=128, no mask, LSE about -122."""
    import torch

    bug = _case(repro, repro.ISSUE_196678, seq_kv=704)
    control = _case(repro, repro.ISSUE_196678, seq_kv=768)
    corner = _case(repro, repro.ISSUE_1072)
    assert bug.masked and bug.seq_q == bug.seq_kv and bug.seq_kv % 128 == 64 and control.seq_kv % 128 == 0
    assert (corner.seq_q, corner.seq_kv, corner.head_dim, corner.masked) == (1, 128, 128, False)
    for case in (bug, control, corner):
        q, k, _, mask, grad_out = repro.inputs(torch, case, device="cpu")
        assert q.dtype == torch.bfloat16 and q.is_leaf and q.requires_grad and grad_out.shape == q.shape
        scores = (q.float() @ k.float().transpose(-2, -1)) / case.head_dim**0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        highest = float(torch.logsumexp(scores.detach(), -1).max())
        assert highest < repro.LSE_OVERFLOW, case  # every row, not only the lowest
        assert repro.lowest_lse(torch, q, k, mask) <= highest
    q, k, _, _, _ = repro.inputs(torch, corner, device="cpu")
    assert -124 < repro.lowest_lse(torch, q, k, None) < -121  # the report saw -122.6 to -122.3


def test_cuDNN_forced_on_the_cpu_is_refused_and_counted_as_not_run(repro):
    import torch

    r = repro.run_case(torch, repro.CASES[-1], device="cpu")
    assert r["ran"] is False and r["refused"] and "nan" not in r
    assert repro.verdict([r]) == outcome.INCONCLUSIVE


def test_without_cudnn_attention_it_says_unknown_and_exits_3(tmp_path):
    if __import__("torch").cuda.is_available():
        pytest.skip("a GPU is here")
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == outcome.INCONCLUSIVE_CODE == 3, proc.stderr
    assert f"{proc.returncode} no case could run on cuDNN here (unknown)" in " ".join(
        SCRIPT.read_text().split()
    )
    data = json.loads(proc.stdout)
    assert data == json.loads(out.read_text())
    assert (
        data["unavailable"] == "no CUDA GPU visible"
        and data["cases"] == []
        and data["verdict"] == "INCONCLUSIVE"
    )
    assert data["torch"] and data["cudnn_name"] == sdpa.cudnn_name(data["cudnn"])
    assert "unknown: cuDNN attention cannot run here (no CUDA GPU visible)" in proc.stderr


def test_predictions_follow_the_reports_cudnn_threshold(repro):
    bug, control, corner = repro.CASES
    before, fixed = 92501, 92600  # 9.25.1 and 9.26.0.51 as torch.backends.cudnn.version() reads them
    assert [repro.expected(c, 91900, H200) for c in (bug, control)] == [repro.NAN_DQ, repro.FINITE]
    assert (
        repro.expected(bug, before, H200) == repro.NAN_DQ and repro.expected(bug, fixed, H200) == repro.FINITE
    )
    assert repro.expected(corner, fixed, H200) == repro.NAN_DK_DV
    assert repro.expected(corner, before, H200).startswith("no prediction")
    assert repro.expected(bug, 91900, (10, 0)).startswith("no prediction")  # both reports are of sm_90
    assert repro.expected(bug, None, H200) == repro.NAN_DQ  # unknown cuDNN: as the report warns


def test_counts_are_judged_against_the_prediction_and_the_verdict(repro):
    nan = {"dq": 45056, "dk": 0, "dv": 0}
    clean = dict.fromkeys(repro.GRADIENTS, 0)
    assert repro.matches(repro.NAN_DQ, nan) and not repro.matches(repro.NAN_DQ, clean)
    assert repro.matches(repro.FINITE, clean) and not repro.matches(repro.FINITE, nan)
    assert repro.matches(repro.NAN_DK_DV, {"dq": 0, "dk": 1, "dv": 0}) and not repro.matches(
        repro.NAN_DK_DV, nan
    )
    assert repro.matches("no prediction: x", nan) is None
    assert repro.verdict([{"ran": True, "nan": nan}, {"ran": False}]) == outcome.FAIL
    assert repro.verdict([{"ran": True, "nan": clean}]) == outcome.PASS
    assert outcome.EXIT[repro.verdict([])] == outcome.INCONCLUSIVE_CODE


def _ctx(tmp_path, gpu):
    ctx = gpu_run.Context(tmp_path, tmp_path / "steps.log", dict(os.environ), deadline=time.monotonic() + 120)
    ctx.gpu = gpu
    return ctx


def _stand_in(tmp_path, monkeypatch, result: dict, rc: int):
    """A script that prints what the reproducer prints on a GPU machine and exits as it would."""
    script = tmp_path / "stand_in.py"
    script.write_text(f"import json, sys\nprint(json.dumps({result!r}))\nsys.exit({rc})\n")
    monkeypatch.setattr(gpu_variant_steps, "NAN_REPRO_SCRIPT", str(script))


def _gpu_run(repro, cudnn, counts):
    cases = []
    for case, nan in zip(repro.CASES, counts, strict=True):
        want = repro.expected(case, cudnn, H200)
        cases.append(
            {
                "case": case.name,
                "ran": True,
                "nan": nan,
                "expected": want,
                "matches": repro.matches(want, nan),
            }
        )
    versions = {"torch": "2.11.0+cu130", "cudnn": cudnn, "cudnn_name": sdpa.cudnn_name(cudnn)}
    return versions | {"unavailable": None, "cases": cases, "verdict": repro.verdict(cases)}


def test_the_kit_step_records_the_counts_and_flags_a_wrong_prediction(repro, tmp_path, monkeypatch):
    h200 = {"name": "NVIDIA H200", "sm": [9, 0]}
    clean = dict.fromkeys(repro.GRADIENTS, 0)
    as_reported = [{"dq": 45056, "dk": 0, "dv": 0}, clean, clean]
    _stand_in(tmp_path, monkeypatch, _gpu_run(repro, 91900, as_reported), outcome.EXIT[outcome.FAIL])
    r = gpu_steps.dispatch(_ctx(tmp_path, h200), "sdpa-nan", None, tmp_path)
    assert r.ok is True and r.got.startswith(
        "cuDNN 9.19.0: pytorch#196678: NaN dQ 45056, dK 0, dV 0 (as predicted)"
    )
    assert "cudnn-frontend#1072: NaN dQ 0, dK 0, dV 0 (no prediction)" in r.got and r.data["cases"]
    # No NaN where the reports predict them on this cuDNN: the warning is not borne out, the step says so.
    _stand_in(tmp_path, monkeypatch, _gpu_run(repro, 91900, [clean] * 3), outcome.EXIT[outcome.PASS])
    r = gpu_steps.dispatch(_ctx(tmp_path, h200), "sdpa-nan", None, tmp_path)
    assert r.ok is False and "(NOT as predicted)" in r.got
    # On 9.26.0.51, the corner case's NaN in dK/dV is what the open report predicts.
    fixed = [clean, clean, {"dq": 0, "dk": 16384, "dv": 16384}]
    _stand_in(tmp_path, monkeypatch, _gpu_run(repro, 92600, fixed), outcome.EXIT[outcome.FAIL])
    assert gpu_steps.dispatch(_ctx(tmp_path, h200), "sdpa-nan", None, tmp_path).ok is True
    # A GPU on which cuDNN attention cannot run is no result.
    none = {"torch": "2.11.0", "cudnn": None, "unavailable": "torch 2.11.0 has no cuDNN", "cases": []}
    _stand_in(tmp_path, monkeypatch, none, outcome.INCONCLUSIVE_CODE)
    r = gpu_steps.dispatch(_ctx(tmp_path, h200), "sdpa-nan", None, tmp_path)
    assert r.ok is False and r.got.startswith("unknown: cuDNN attention cannot run here")
