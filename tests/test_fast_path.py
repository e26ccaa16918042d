"""The compile parts put on one model (ftenv.train.fast_path): the CUDA-graph arm without a GPU
falls back cleanly to compiled-without-graphs, and says so; parts and bucketing reach the model."""

from __future__ import annotations

import copy

import pytest
import torch

from ftenv.selfcheck import tinymodel
from ftenv.selfcheck.loop import prepare, train
from ftenv.train import buckets, compiled_audio, compiled_decoder, fast_path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tiny = tmp_path_factory.mktemp("tiny")
    tinymodel.build(tiny)
    return prepare(tiny, "cpu", 3, 1, 0, "fp32")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the GPU kit runs the CUDA-graph arm")
def test_cuda_graphs_without_a_gpu_fall_back_to_compiled_without_graphs(prepared):
    model = copy.deepcopy(prepared.model)
    spec = buckets.parse("64")
    done = fast_path.apply(model, ("regional", "audio", "cudagraphs"), spec)  # CUDA inputs asked for
    assert done["notes"] == ["no CUDA GPU: compiled without CUDA graphs"]
    assert done["hooks"] == [] and all(s.graphed is None for s in done["switches"])
    cpu = fast_path.apply(copy.deepcopy(prepared.model), ("regional", "cudagraphs"), spec, devices=("cpu",))
    assert cpu["notes"] == ["CUDA graphs are for CUDA inputs only: compiled without graphs"]
    _, losses = train(model, [buckets.pad_batch(b, spec) for b in prepared.batches], "cpu")  # runs, eager
    assert all(s.calls["compiled"] == 0 for s in done["switches"]) and len(losses) == len(prepared.batches)


def test_parts_and_bucketing_reach_the_model(prepared):
    model = copy.deepcopy(prepared.model)
    done = fast_path.apply(model, ("decoder",), None, devices=("cpu",), backend="eager")
    assert isinstance(model.llm.model.forward, compiled_decoder.Switch) and len(done["switches"]) == 1
    assert "forward" not in model.audio_adaptor.__dict__
    bucketed = copy.deepcopy(prepared.model)
    fast_path.apply(bucketed, (), buckets.parse("64"))
    assert getattr(bucketed.audio_adaptor.forward, "ftenv_adaptor_forward", False)
    compiled_audio.uninstall(bucketed)
    assert "forward" not in bucketed.audio_adaptor.__dict__
