"""benchmarks/batched_decode.py's code path on the CPU with the tiny model (a smoke test, not a
measurement): both paths run, their hypotheses are compared, the JSON is complete."""

from __future__ import annotations

import importlib.util
import json
import sys

import torch

from ftenv.selfcheck import tinymodel
from support import ROOT

SCRIPT = ROOT / "benchmarks" / "batched_decode.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("batched_decode", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_both_paths_and_compares_them(tiny, tmp_path, capsys):
    threads = torch.get_num_threads()
    out = tmp_path / "decode.json"
    p = tinymodel.paths(tiny)
    argv = ["--model-dir", str(p.root), "--test", str(p.train_jsonl), "--utterances", "3"]
    try:
        rc = _benchmark().main(
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
