"""`audiocache` (ftenv.trainer.fastpath.audio_cache) on the CPU with the tiny Fun-ASR-Nano: the
second epoch over the same batches is served from the cache (the encoder not called), a changed
input misses, entries leave least recently used first at the byte limit, and the losses are
eager's with the frozen encoder in eval mode (the recipe's, with dropout on, measured apart)."""

from __future__ import annotations

import copy

import pytest
import torch

from ftenv.selfcheck.loop import train
from ftenv.trainer import compile_setting
from ftenv.trainer.fastpath import audio_cache, sync_free


@pytest.fixture(scope="module")
def prepared(prepared_tiny):
    return prepared_tiny(6)


def _keyed(batches):
    return [audio_cache.add_speech_keys(dict(b)) for b in batches]


def _cached(model):
    model = copy.deepcopy(model)
    assert sync_free.install(model) is None
    cache = audio_cache.install(model)
    calls = []
    encode = model.encode

    def counting(speech, speech_lengths):
        calls.append(speech.shape[0])
        return encode(speech, speech_lengths)

    model.encode = counting
    return model, cache, calls


def test_second_epoch_is_all_hits_and_never_calls_the_encoder(prepared):
    batches = _keyed(prepared.batches)
    seen, misses = set(), 0
    for keys in (b[audio_cache.SPEECH_KEYS] for b in batches):
        misses += sum(k not in seen for k in keys)  # a row seen in an earlier batch only is a hit
        seen.update(keys)
    rows = sum(len(b[audio_cache.SPEECH_KEYS]) for b in batches)
    model, cache, calls = _cached(prepared.model)
    train(model, batches, "cpu")
    assert cache.counts == {"hits": rows - misses, "misses": misses, "evicted": 0}
    assert len(cache.entries) == len(seen) and sum(calls) == misses
    calls.clear()
    train(model, batches, "cpu")
    assert cache.counts["hits"] == 2 * rows - misses and cache.counts["misses"] == misses
    assert calls == []


def test_a_changed_input_misses(prepared):
    batches = _keyed(prepared.batches[:1])
    model, cache, _ = _cached(prepared.model)
    train(model, batches, "cpu")
    changed = dict(prepared.batches[0])
    changed["speech"] = changed["speech"].clone()
    changed["speech"][0, 0, 0] += 1.0  # the first frame is valid in every row
    before = dict(cache.counts)
    train(model, _keyed([changed]), "cpu")
    rows = changed["speech"].shape[0]
    assert cache.counts["misses"] - before["misses"] == 1
    assert cache.counts["hits"] - before["hits"] == rows - 1


class _Identity:
    """A stand-in model whose `encode` returns its input: the cache's bookkeeping alone."""

    def __init__(self):
        self.audio_encoder = torch.nn.Identity()

    def encode(self, speech, speech_lengths):
        return speech, speech_lengths


def test_entries_leave_least_recently_used_first_at_the_byte_limit():
    model = _Identity()
    rows = [torch.full((1, 4, 25), float(i)) for i in range(4)]  # 400 bytes each
    lengths = torch.tensor([4])
    cache = audio_cache.EncoderCache(limit=1200)
    for row in rows[:3]:
        cache.encode(model, row, lengths)
    cache.encode(model, rows[0], lengths)  # row 0 used again: row 1 is now the oldest
    cache.encode(model, rows[3], lengths)
    assert cache.bytes == 1200 and cache.counts["evicted"] == 1
    assert cache.counts["hits"] == 1 and cache.counts["misses"] == 4
    out, lens = cache.encode(model, rows[0], lengths)
    assert cache.counts["hits"] == 2 and torch.equal(out, rows[0]) and lens.tolist() == [4]
    cache.encode(model, rows[1], lengths)
    assert cache.counts["misses"] == 5


def _frozen_in_eval(model):
    """Eager FunASR with the frozen encoder held in eval mode (model.train() leaves it there)."""
    model = copy.deepcopy(model)
    encoder = model.audio_encoder
    encoder.eval()
    encoder.train = lambda mode=True: encoder
    return model


def test_losses_are_eagers_with_the_encoder_in_eval_mode(prepared):
    batches = _keyed(prepared.batches)
    _, want = train(_frozen_in_eval(prepared.model), batches + batches, "cpu")
    model, cache, _ = _cached(prepared.model)
    _, got = train(model, batches + batches, "cpu")
    assert cache.counts["hits"] > 0
    assert max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True)) <= 1e-5


def test_losses_against_the_recipes_with_dropout_on(prepared):
    """The recipe's trainer leaves the frozen encoder's dropout on: the losses differ, a little."""
    dropouts = [m.p for m in prepared.model.audio_encoder.modules() if isinstance(m, torch.nn.Dropout)]
    assert dropouts and max(dropouts) > 0, "the tiny encoder has no dropout: nothing to measure"
    batches = _keyed(prepared.batches)
    _, want = train(copy.deepcopy(prepared.model), batches + batches, "cpu")
    model, _, _ = _cached(prepared.model)
    _, got = train(model, batches + batches, "cpu")
    diff = max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True))
    print(f"audiocache vs recipe (dropout on), tiny model, CPU: max relative loss difference {diff:.2e}")
    assert 0 < diff <= 0.05


def test_a_training_encoder_is_refused(prepared):
    model = copy.deepcopy(prepared.model)
    next(model.audio_encoder.parameters()).requires_grad_(True)
    with pytest.raises(ValueError, match="freeze: true"):
        audio_cache.install(model)


def test_audiocache_is_opt_in_and_not_with_audiowhole():
    assert "audiocache" in compile_setting.PARTS and "audiocache" not in compile_setting.DEFAULT_PARTS
    env = {"FTENV_COMPILE": "regional,audio,nosync,audiocache"}
    assert "audiocache" in compile_setting.compile_parts(env)
    with pytest.raises(ValueError, match="choose one"):
        compile_setting.compile_parts({"FTENV_COMPILE": "audiowhole,audiocache"})
