"""Bucketing (`ftenv finetune --buckets SPEC`, FTENV_BUCKETS): each collated batch padded to one of
few (batch, length) shapes, because every new shape is a new cuDNN plan, a recompile and a new CUDA
graph (FunASR issue #3704); padded rows and positions stay out of the loss (docs/compile.md).
"""

from __future__ import annotations

from dataclasses import dataclass

#: FunASR's collator pads ints with this (datasets/fun_asr_datasets, int_pad_value).
INT_PAD = -1
#: Batch sizes padded to when the spec names none.
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: The token-dimension keys of a collated Fun-ASR-Nano batch, and the per-row audio-turn keys.
TOKEN_KEYS = ("input_ids", "attention_mask", "labels_ids")
TURN_KEYS = ("fbank_beg", "fbank_mask", "fake_token_len")


@dataclass(frozen=True)
class Buckets:
    lengths: tuple[int, ...]  # one value: a multiple; several: the list
    batches: tuple[int, ...] = DEFAULT_BATCHES

    def length(self, n: int) -> int:
        """The bucketed length of n (n itself when longer than the list)."""
        if len(self.lengths) == 1:
            m = self.lengths[0]
            return -(-n // m) * m
        return next((b for b in self.lengths if b >= n), n)

    def batch(self, n: int) -> int:
        return next((b for b in self.batches if b >= n), n)

    def holds(self, batch: int, length: int) -> bool:
        """Whether (batch, length) is one of the buckets (the CUDA-graph variant runs only those)."""
        in_lengths = length % self.lengths[0] == 0 if len(self.lengths) == 1 else length in self.lengths
        return batch in self.batches and in_lengths

    def holds_lead(self, lead) -> bool:
        """`holds` for the first tensor of a forward call: (batch, length, ...)."""
        return lead.ndim >= 2 and self.holds(int(lead.shape[0]), int(lead.shape[1]))

    def spec(self) -> str:
        return ",".join(map(str, self.lengths)) + ":" + ",".join(map(str, self.batches))


def parse(spec: str) -> Buckets:
    """`LENGTHS[:BATCHES]`: `64`, `64:2,4,8,16,32`, `256,512,1024,2048:8,16,32`."""
    lengths_part, colon, batches_part = spec.strip().partition(":")
    try:
        lengths = tuple(int(x) for x in lengths_part.split(","))
        batches = tuple(int(x) for x in batches_part.split(",")) if colon else DEFAULT_BATCHES
    except ValueError:
        lengths, batches = (), ()
    if not lengths or not batches or min(lengths + batches) < 1:
        raise ValueError(
            f"buckets {spec!r} not understood: give LENGTHS[:BATCHES], e.g. `64` (lengths padded to a "
            "multiple of 64, batch sizes to powers of two) or `256,512,1024,2048:8,16,32`"
        )
    return Buckets(tuple(sorted(lengths)), tuple(sorted(batches)))


def _pad_dim(t, dim: int, size: int, value):
    import torch

    if t.shape[dim] >= size:
        return t
    shape = list(t.shape)
    shape[dim] = size - t.shape[dim]
    return torch.cat([t, torch.full(shape, value, dtype=t.dtype)], dim=dim)


def pad_batch(batch: dict, buckets: Buckets) -> dict:
    """A collated Fun-ASR-Nano batch padded to its bucket (a new dict; tensors on the CPU)."""
    out = dict(batch)
    if "input_ids" not in batch:
        return out
    rows, length = batch["input_ids"].shape
    to_rows, to_length = buckets.batch(rows), buckets.length(length)
    for key in TOKEN_KEYS:
        if key in out:
            out[key] = _pad_dim(_pad_dim(out[key], 1, to_length, INT_PAD), 0, to_rows, INT_PAD)
    if "attention_mask" in out and to_rows > rows:
        out["attention_mask"][rows:, 0] = 1  # one real key: no fully masked attention row
    for key in TURN_KEYS:
        if key in out:
            out[key] = _pad_dim(out[key], 0, to_rows, 0)
    if "speech" in out:
        speech_rows, frames = out["speech"].shape[:2]
        to_speech_rows, to_frames = buckets.batch(speech_rows), buckets.length(frames)
        out["speech"] = _pad_dim(_pad_dim(out["speech"], 1, to_frames, 0.0), 0, to_speech_rows, 0.0)
        if "speech_lengths" in out:
            out["speech_lengths"] = _pad_dim(out["speech_lengths"], 0, to_speech_rows, 1)
    return out


def distinct_shapes(shapes, buckets: Buckets | None = None) -> int:
    """How many distinct (batch, length) shapes a run sees, bucketed or not."""
    if buckets is None:
        return len(set(shapes))
    return len({(buckets.batch(b), buckets.length(t)) for b, t in shapes})


def padding_share(batches, buckets: Buckets | None = None) -> dict:
    """The share of padded positions over collated batches, padded to their longest (None) or to
    their buckets: LLM token positions (real: attention mask > 0) and speech frames (real: the
    speech lengths). What a bucket spec costs in wasted compute, apart from what its few shapes
    gain (CUDA graphs, no recompiles)."""
    real_tokens = tokens = real_frames = frames = 0
    for b in batches:
        rows, length = b["input_ids"].shape
        tokens += buckets.batch(rows) * buckets.length(length) if buckets else rows * length
        real_tokens += int((b["attention_mask"] > 0).sum())
        if "speech" in b:
            srows, sframes = b["speech"].shape[:2]
            frames += buckets.batch(srows) * buckets.length(sframes) if buckets else srows * sframes
            lengths = b["speech_lengths"]
            real_frames += int((lengths[:, 0] if lengths.ndim > 1 else lengths).sum())
    return {
        "padded_token_share": 1 - real_tokens / tokens if tokens else None,
        "padded_frame_share": 1 - real_frames / frames if frames else None,
    }
