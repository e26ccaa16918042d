"""Bucketing (`ftenv finetune --buckets SPEC`): few shapes, and the loss over real tokens unchanged.

- the spec and its errors; 8 distinct (batch, length) shapes of the tiny data become at most 3;
- a bucketed batch trains to the loss and gradients of the unpadded one (eager, the tiny model),
  and the same check sees it when padded labels are not kept out of the loss (the control);
- no attention row of a padded batch is fully masked.
`ftenv finetune --buckets` through FunASR's own trainer: tests/ftenv/trainer/test_parts.py.
"""

from __future__ import annotations

import copy

import pytest
import torch

from ftenv.trainer.fastpath import buckets, compiled_audio


@pytest.fixture(scope="module")
def prepared(prepared_tiny):
    return prepared_tiny(8)


def test_the_spec_reads_lengths_and_batches():
    b = buckets.parse("64")
    assert (b.length(1), b.length(64), b.length(65), b.batch(3), b.batch(200)) == (64, 64, 128, 4, 256)
    b = buckets.parse("256,512:8,16")
    assert (b.length(100), b.length(300), b.length(600), b.batch(3), b.batch(17)) == (256, 512, 600, 8, 17)
    assert b.holds(8, 512) and not b.holds(8, 600) and not b.holds(17, 256)
    for junk in ("", "x", "64:", "0", "64:a"):
        with pytest.raises(ValueError, match=r"LENGTHS\[:BATCHES\], e\.g\. `64`"):
            buckets.parse(junk)


def test_eight_shapes_become_at_most_three(prepared):
    shapes = [tuple(b["input_ids"].shape) for b in prepared.batches]
    assert buckets.distinct_shapes(shapes) >= 8
    spec = buckets.parse("64")
    assert buckets.distinct_shapes(shapes, spec) <= 3
    padded = {tuple(buckets.pad_batch(b, spec)["input_ids"].shape) for b in prepared.batches}
    assert len(padded) == buckets.distinct_shapes(shapes, spec)
    assert all(spec.holds(*shape) for shape in padded)


def _loss_and_grads(model, batch):
    model.zero_grad(set_to_none=True)
    loss, _, _ = model(**{k: v.clone() for k, v in batch.items()})
    loss.backward()
    return float(loss), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _padded_loss_matches(model, batch, spec) -> bool:
    want, want_grads = _loss_and_grads(model, batch)
    got, got_grads = _loss_and_grads(model, buckets.pad_batch(batch, spec))
    same_grads = all(torch.allclose(got_grads[n], g, rtol=1e-4, atol=1e-6) for n, g in want_grads.items())
    return abs(got - want) <= 1e-5 * abs(want) and same_grads


def test_padded_rows_and_positions_leave_the_loss_and_gradients_unchanged(prepared, monkeypatch):
    model = copy.deepcopy(prepared.model)
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    compiled_audio.install_adaptor_forward(model)  # frames padded beyond the longest need it
    spec = buckets.parse("64:4,8")
    batch = prepared.batches[0]
    assert buckets.pad_batch(batch, spec)["input_ids"].shape[0] > batch["input_ids"].shape[0]
    assert _padded_loss_matches(model, batch, spec)
    # The control: padded with a real token id (0) instead of -1, the labels enter the loss.
    monkeypatch.setattr(buckets, "INT_PAD", 0)
    assert not _padded_loss_matches(model, batch, spec)


def test_no_attention_row_is_fully_masked(prepared):
    spec = buckets.parse("64:8")
    for batch in prepared.batches:
        padded = buckets.pad_batch(batch, spec)
        assert (padded["attention_mask"] > 0).any(dim=1).all()
        assert (padded["speech_lengths"] > 0).all()
