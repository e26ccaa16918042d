"""The frozen audio encoder's outputs cached across epochs (`--compile-parts ...,audiocache`, opt-in),
because the recipe's ~50 epochs recompute the same frozen outputs; the encoder then runs in eval
mode (no dropout), which is what changes (docs/compile.md).
"""

from __future__ import annotations

import collections
import hashlib

import torch

from ftenv.trainer.fastpath.sync_free import AUDIO_CACHE, SPEECH_KEYS

#: The most bytes of encoder outputs kept on the device: 4 GiB holds about 2 million encoder frames
#: of Fun-ASR-Nano (512 fp32 values, 60 ms of audio each), about 30 hours of audio.
CACHE_BYTES = 4 << 30


def speech_keys(speech, speech_lengths) -> list[str]:
    """One fingerprint per row: the hash of its valid frames (bytes, shape, dtype)."""
    speech, lengths = speech.detach().cpu(), speech_lengths.detach().cpu()
    if lengths.dim() > 1:
        lengths = lengths[:, 0]
    keys = []
    for row, length in zip(speech, lengths.tolist(), strict=True):
        valid = row[: int(length)].contiguous()
        digest = hashlib.blake2b(valid.numpy().tobytes(), digest_size=16)
        digest.update(f"{tuple(valid.shape)}{valid.dtype}".encode())
        keys.append(digest.hexdigest())
    return keys


def add_speech_keys(batch: dict) -> dict:
    """The collated batch with SPEECH_KEYS (computed on the CPU, before the batch moves)."""
    if "speech" in batch and "speech_lengths" in batch:
        batch[SPEECH_KEYS] = speech_keys(batch["speech"], batch["speech_lengths"])
    return batch


class EncoderCache:
    """Encoder outputs by speech fingerprint, least recently used out past `limit` bytes."""

    def __init__(self, limit: int = CACHE_BYTES):
        self.limit = limit
        self.entries: collections.OrderedDict[str, torch.Tensor] = collections.OrderedDict()
        self.bytes = 0
        self.counts = {"hits": 0, "misses": 0, "evicted": 0}

    def _store(self, key: str, frames: torch.Tensor) -> None:
        size = frames.numel() * frames.element_size()
        if size > self.limit:
            return
        self.entries[key] = frames
        self.bytes += size
        while self.bytes > self.limit:
            _, old = self.entries.popitem(last=False)
            self.bytes -= old.numel() * old.element_size()
            self.counts["evicted"] += 1

    def encode(self, model, speech, speech_lengths, keys=None):
        """(encoder_out, encoder_out_lens) as FunASRNano.encode gives them in eval mode; the
        encoder runs on the rows not cached only."""
        if speech_lengths.dim() > 1:
            speech_lengths = speech_lengths[:, 0]
        if keys is None:
            keys = speech_keys(speech, speech_lengths)
        missing = [i for i, key in enumerate(keys) if key not in self.entries]
        self.counts["hits"] += len(keys) - len(missing)
        self.counts["misses"] += len(missing)
        rows = {}
        if missing:
            index = torch.tensor(missing, device=speech.device)
            encoder = model.audio_encoder
            was_training = encoder.training
            encoder.eval()
            try:
                with torch.no_grad():
                    out, lens = model.encode(speech[index].clone(), speech_lengths[index])
            finally:
                encoder.train(was_training)
            for i, frames, length in zip(missing, out, lens.tolist(), strict=True):
                rows[i] = frames[: int(length)].clone()
                self._store(keys[i], rows[i])
        for i, key in enumerate(keys):
            if i not in rows:
                rows[i] = self.entries[key]
                self.entries.move_to_end(key)
        ordered = [rows[i] for i in range(len(keys))]
        encoder_out = torch.nn.utils.rnn.pad_sequence(ordered, batch_first=True)
        encoder_out_lens = torch.tensor([r.shape[0] for r in ordered], device=encoder_out.device)
        return encoder_out, encoder_out_lens


def install(model, limit: int = CACHE_BYTES) -> EncoderCache:
    """Give this model instance the cache (the sync-free forward uses it); returns it. Refuses an
    encoder that trains: its outputs change every step, a cache would serve stale ones."""
    encoder = getattr(model, "audio_encoder", None)
    if encoder is None or not hasattr(model, "encode"):
        raise TypeError(f"{type(model).__name__} has no `audio_encoder`: audiocache is for Fun-ASR-Nano")
    if any(p.requires_grad for p in encoder.parameters()):
        raise ValueError(
            "audiocache caches the frozen audio encoder's outputs, but this model's audio encoder "
            "trains (audio_encoder_conf: freeze: false): set freeze: true, or drop `audiocache` "
            "from the compile parts"
        )
    current = model.__dict__.get(AUDIO_CACHE)
    if isinstance(current, EncoderCache):
        return current
    cache = EncoderCache(limit)
    model.__dict__[AUDIO_CACHE] = cache
    return cache


def remove(model) -> None:
    model.__dict__.pop(AUDIO_CACHE, None)
