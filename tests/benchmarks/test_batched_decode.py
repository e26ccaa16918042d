"""benchmarks/batched_decode.py's code path on the CPU with the tiny model (a smoke test, not a
measurement): both paths run, their hypotheses are compared, the JSON is complete."""

from __future__ import annotations

import json
import time

import torch

from benchmarks import batched_decode
from ftenv.selfcheck import tinymodel
from imagetools.gpukit import gpu_decode_step, gpu_run, gpu_steps
from support import child_env


def test_the_benchmark_runs_both_paths_and_compares_them(tiny, tmp_path, capsys):
    threads = torch.get_num_threads()
    out = tmp_path / "decode.json"
    p = tinymodel.paths(tiny)
    argv = ["--model-dir", str(p.root), "--test", str(p.train_jsonl), "--utterances", "3"]
    try:
        rc = batched_decode.main(
            [*argv, "--batch-size", "2", "--max-new-tokens", "6", "--device", "cpu", "--json", str(out)]
        )
    finally:
        torch.set_num_threads(threads)
    result = json.loads(out.read_text())
    assert rc == 0 and result["equal_hypotheses"] == result["utterances"] == 3
    assert result["generated_tokens"] == 3 * 6  # no end token in the tiny LLM: equal work on both paths
    assert result["device"] == "cpu" and result["llm_dtype"] == "fp32"
    assert result["upstream_utt_per_s"] > 0 and result["batched_utt_per_s"] > 0
    assert result["speedup"] == result["upstream_s"] / result["batched_s"]
    assert "equal hypotheses (token ids): 3/3" in capsys.readouterr().out


def _kit_ctx(tmp_path, gpu):
    ctx = gpu_run.Context(tmp_path, tmp_path / "steps.log", child_env(), deadline=time.monotonic() + 60)
    ctx.gpu = gpu
    return ctx


def _stand_in(path, result: dict, rc: int = 0):
    """Prints what the benchmark prints with `--json /dev/stdout`: its lines, then the indented JSON."""
    body = json.dumps(result, indent=2)
    path.write_text(f"import sys\nprint('machine: stand-in')\nprint({body!r})\nsys.exit({rc})\n")


def test_the_kit_step_asks_for_equal_hypotheses_and_a_gain(tmp_path, monkeypatch):
    assert "batched-decode" in gpu_steps.STEPS
    no_gpu = gpu_steps.dispatch(_kit_ctx(tmp_path, None), "batched-decode", None, tmp_path)
    assert no_gpu.got == gpu_run.NO_GPU
    stand_in = tmp_path / "stand_in.py"
    monkeypatch.setattr(gpu_decode_step, "BATCHED_DECODE_SCRIPT", str(stand_in))
    gpu = {"name": "GPU", "sm": [9, 0]}
    good = {"utterances": 32, "equal_hypotheses": 32, "speedup": 6.5, "llm_dtype": "bf16", "gpu": "GPU"}
    _stand_in(stand_in, good)
    r = gpu_steps.dispatch(_kit_ctx(tmp_path, gpu), "batched-decode", None, tmp_path)
    assert (r.ok, r.got) == (True, "6.50x upstream, 32/32 equal hypotheses")
    assert r.data["speedup"] == 6.5 and r.data["llm_dtype"] == "bf16"
    for bad, rc in (({"equal_hypotheses": 31}, 0), ({"speedup": 0.9}, 0), ({}, 1)):
        _stand_in(stand_in, good | bad, rc)
        assert gpu_steps.dispatch(_kit_ctx(tmp_path, gpu), "batched-decode", None, tmp_path).ok is False
    stand_in.write_text("import sys\nprint('Traceback: CUDA error')\nsys.exit(1)\n")
    r = gpu_steps.dispatch(_kit_ctx(tmp_path, gpu), "batched-decode", None, tmp_path)
    assert r.ok is False and "exit 1" in r.got
