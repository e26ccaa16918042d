"""Finer buckets and the padding they waste (ftenv.trainer.fastpath.buckets): the matrix's finer spec
(lengths to multiples of 32, batch sizes 8, 12, 16, 24, 32) pads to those shapes, and
`padding_share` counts FunASR's pads (-1 in the attention mask) as padding, the real speech frames
by their lengths. benchmarks/padding_waste.py records the shares on the matrix's batches."""

from __future__ import annotations

import pytest
import torch

from ftenv.trainer.fastpath import buckets

FINE = "32:8,12,16,24,32"


def _batch(rows: int, tokens: int, real: int, frames: int, real_frames: int) -> dict:
    mask = torch.full((rows, tokens), -1, dtype=torch.long)  # FunASR's int pad value
    mask[:, :real] = 1
    return {
        "input_ids": torch.zeros(rows, tokens, dtype=torch.long),
        "attention_mask": mask,
        "speech": torch.zeros(rows, frames, 4),
        "speech_lengths": torch.full((rows, 1), real_frames),
    }


def test_the_finer_spec_pads_to_its_shapes():
    spec = buckets.parse(FINE)
    assert spec.lengths == (32,) and spec.batches == (8, 12, 16, 24, 32)
    padded = buckets.pad_batch(_batch(9, 40, 30, 50, 45), spec)
    assert padded["input_ids"].shape == (12, 64) and padded["speech"].shape[:2] == (12, 64)
    assert spec.holds(12, 64) and not spec.holds(9, 64)


def test_padding_share_counts_funasrs_pads_and_the_buckets():
    batch = _batch(9, 40, 30, 50, 45)  # 9 x 30 real tokens of 9 x 40; 9 x 45 real frames of 9 x 50
    longest = buckets.padding_share([batch])
    assert longest["padded_token_share"] == pytest.approx(1 - 30 / 40)
    assert longest["padded_frame_share"] == pytest.approx(1 - 45 / 50)
    fine = buckets.padding_share([batch], buckets.parse(FINE))  # 12 x 64 either way
    assert fine["padded_token_share"] == pytest.approx(1 - 9 * 30 / (12 * 64))
    assert fine["padded_frame_share"] == pytest.approx(1 - 9 * 45 / (12 * 64))
    coarse = buckets.padding_share([batch], buckets.parse("64"))  # 16 x 64
    assert coarse["padded_token_share"] > fine["padded_token_share"] > longest["padded_token_share"]
