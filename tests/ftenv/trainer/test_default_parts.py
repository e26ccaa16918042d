"""What `--compile` turns on (ftenv.trainer.compile_setting.DEFAULT_PARTS) is safe without a GPU
measurement: no CUDA graphs (so no buckets needed), accepted with gradient accumulation, and
eager's losses on the tiny Fun-ASR-Nano (CPU, Dynamo's `aot_eager` backend: the same graphs as
Inductor, no kernels). Its speed is the matrix's (docs/benchmarks.md), on a GPU."""

from __future__ import annotations

import copy

import pytest
import torch

from ftenv import variables
from ftenv.launch import speed_options
from ftenv.selfcheck.loop import train
from ftenv.trainer import compile_setting
from ftenv.trainer.fastpath import labelled_head, parts


def test_the_default_needs_no_buckets_and_takes_gradient_accumulation(tmp_path):
    assert compile_setting.compile_parts({variables.COMPILE: "1"}) == compile_setting.DEFAULT_PARTS
    assert "cudagraphs" not in compile_setting.DEFAULT_PARTS
    speed = speed_options.SpeedOptions(compile=True)
    sp = speed_options.for_trainer(speed, {"train_conf.accum_grad": 4}, {}, tmp_path)
    assert sp.env[variables.COMPILE] == "1"


@pytest.fixture(scope="module")
def prepared(prepared_tiny):
    return prepared_tiny(6, dropout=False)


@pytest.mark.slow
def test_the_default_trains_to_eagers_losses(prepared):
    model = copy.deepcopy(prepared.model)
    _, want = train(copy.deepcopy(model), prepared.batches, "cpu")
    batches = prepared.batches
    if "lmhead" in compile_setting.DEFAULT_PARTS:  # as the collator gives them in training
        batches = [labelled_head.add_label_index(dict(b)) for b in batches]
    torch._dynamo.reset()
    done = parts.apply(model, compile_setting.DEFAULT_PARTS, None, devices=("cpu",), backend="aot_eager")
    try:
        _, got = train(model, batches, "cpu")
    finally:
        parts.remove(model, done)
    assert all(s.calls["compiled"] == len(batches) for s in done["switches"])
    assert max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True)) <= 1e-6
