"""The compile parts put on one model (ftenv.trainer.fastpath.parts): the CUDA-graph arm without a GPU
falls back cleanly to compiled-without-graphs, and says so; parts and bucketing reach the model,
also through `ftenv finetune --compile-parts ... --buckets ...` and FunASR's own trainer (CPU:
the compiled regions stay eager there, the batches are padded)."""

from __future__ import annotations

import copy
import re

import pytest
import torch

from ftenv.selfcheck.loop import train
from ftenv.trainer.fastpath import buckets, compiled_audio, compiled_decoder, parts
from support import child_env, finetune_tiny


@pytest.fixture(scope="module")
def prepared(prepared_tiny):
    return prepared_tiny(3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the GPU kit runs the CUDA-graph arm")
def test_cuda_graphs_without_a_gpu_fall_back_to_compiled_without_graphs(prepared):
    model = copy.deepcopy(prepared.model)
    spec = buckets.parse("64")
    done = parts.apply(model, ("regional", "audio", "cudagraphs"), spec)  # CUDA inputs asked for
    assert done["notes"] == ["no CUDA GPU: compiled without CUDA graphs"]
    assert done["hooks"] == [] and all(s.graphed is None for s in done["switches"])
    cpu = parts.apply(copy.deepcopy(prepared.model), ("regional", "cudagraphs"), spec, devices=("cpu",))
    assert cpu["notes"] == ["CUDA graphs are for CUDA inputs only: compiled without graphs"]
    _, losses = train(model, [buckets.pad_batch(b, spec) for b in prepared.batches], "cpu")  # runs, eager
    assert all(s.calls["compiled"] == 0 for s in done["switches"]) and len(losses) == len(prepared.batches)


def test_parts_and_bucketing_reach_the_model(prepared):
    model = copy.deepcopy(prepared.model)
    done = parts.apply(model, ("decoder",), None, devices=("cpu",), backend="eager")
    assert isinstance(model.llm.model.forward, compiled_decoder.Switch) and len(done["switches"]) == 1
    assert "forward" not in model.audio_adaptor.__dict__
    bucketed = copy.deepcopy(prepared.model)
    parts.apply(bucketed, (), buckets.parse("64"))
    assert getattr(bucketed.audio_adaptor.forward, "ftenv_adaptor_forward", False)
    compiled_audio.uninstall(bucketed)
    assert "forward" not in bucketed.audio_adaptor.__dict__


@pytest.mark.slow
def test_finetune_with_parts_and_buckets_through_the_real_trainer(tiny, tmp_path):
    env = child_env(FTENV_FUNASR_CPU_SHIM="1", FTENV_WATCH="0")
    r = finetune_tiny(
        tiny,
        tmp_path / "out",
        *("--compile-parts", "regional,audio,cudagraphs", "--buckets", "64:4,8", "++device=cpu"),
        *("++dataset_conf.num_workers=0", "++llm_conf.llm_dtype=fp32", "++train_conf.max_epoch=1"),
        "++dataset_conf.batch_size=500",
        env=env,
        timeout=600,
    )
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert "compiled regional, audio, cudagraphs installed on FunASRNano" in log
    assert "no CUDA GPU: compiled without CUDA graphs" in log
    assert "every batch of the FunASR dataset padded to its bucket" in log
    sizes = re.findall(r"\('batch_size', (\d+)\), \('batch_size_x_tokens', (\d+)\)", log)
    assert len(sizes) >= 5, log[-3000:]
    assert {(int(b), int(t) // int(b)) for b, t in sizes} <= {(4, 64), (4, 128), (8, 64), (8, 128)}
    # 2 decoder layers, 1 + 1 + 1 encoder blocks and the adaptor; every call eager on the CPU.
    calls = re.search(r"ftenv: compiled: 0 calls compiled \(0 with CUDA graphs\), (\d+) eager, over 6 ", log)
    assert calls and int(calls.group(1)) >= 6 * len(sizes), log[-3000:]
