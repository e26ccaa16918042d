"""Batched decoding gives upstream's one-at-a-time hypotheses on the tiny model, token for token, and
a batch whose padding reaches the prompt (right padding, or no attention mask) does not."""

from __future__ import annotations

import json

import pytest
import torch

from ftenv.evaluate import decode
from ftenv.selfcheck import tinymodel

#: Enough generated tokens per utterance that a leak shows in the ids, few enough for a fast test.
NEW_TOKENS = 16


def utterances(tiny, n: int) -> list[decode.Utterance]:
    """The first n utterances of the tiny data: 0.6 to 2 s, each of another length."""
    out = []
    for raw in tinymodel.paths(tiny).train_jsonl.read_text(encoding="utf-8").splitlines()[:n]:
        item = json.loads(raw)
        user = item["messages"][1]["content"]
        out.append(
            decode.Utterance(item["key"], user.split("<|startofspeech|>!")[1].split("<|endofspeech|>")[0])
        )
    return out


def spread_weights(loaded: decode.Loaded, seed: int = 0) -> None:
    """Seeded weights of a larger spread than the random init's (std 0.02): its greedy choice hardly
    depends on the input (one token repeated), so equal hypotheses would prove little."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in loaded.model.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * (2.0 / p.shape[-1] ** 0.5))


@pytest.fixture(scope="module")
def model(tiny):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is the fastest on a shared CPU
    loaded = decode.load_model(tinymodel.paths(tiny).root, device="cpu")
    spread_weights(loaded)
    yield loaded
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def reference(model, tiny):
    utts = utterances(tiny, 5)
    return utts, decode.decode_one_by_one(model, utts, max_new_tokens=NEW_TOKENS)


def test_the_reference_is_worth_comparing(reference):
    utts, ref = reference
    ids = [ref.token_ids[u.key] for u in utts]
    assert all(len(i) == NEW_TOKENS for i in ids)  # the tiny LLM has no eos: every token is generated
    assert len({tuple(i) for i in ids}) == len(ids)  # each utterance its own hypothesis
    assert len({t for i in ids for t in i}) >= 2 * len(ids)  # not one token repeated


def test_batched_gives_upstreams_hypotheses(model, reference):
    utts, ref = reference
    sizes = {decode._size(u.audio) for u in utts}
    assert len(sizes) == len(utts)  # different lengths: every batch is padded
    for batch_size in (5, 2):
        got = decode.decode_batched(model, utts, batch_size=batch_size, max_new_tokens=NEW_TOKENS)
        assert got.token_ids == ref.token_ids
        assert got.hypotheses == ref.hypotheses
        assert list(got.hypotheses) == [u.key for u in utts]


def _right_pad(embeds, dtype):
    longest = max(e.shape[0] for e in embeds)
    batch = torch.zeros(len(embeds), longest, embeds[0].shape[-1], dtype=dtype)
    mask = torch.zeros(len(embeds), longest, dtype=torch.long)
    for i, e in enumerate(embeds):
        batch[i, : e.shape[0]] = e.to(dtype)
        mask[i, : e.shape[0]] = 1
    return batch, mask


def _no_mask(embeds, dtype, left_pad=decode.left_pad):
    batch, mask = left_pad(embeds, dtype)
    return batch, torch.ones_like(mask)


@pytest.mark.parametrize("leak", [_right_pad, _no_mask], ids=["right-padding", "no-attention-mask"])
def test_padding_that_reaches_the_prompt_changes_the_hypotheses(model, reference, monkeypatch, leak):
    """The comparison above is sharp enough to see a leak: with it, padded utterances differ."""
    utts, ref = reference
    monkeypatch.setattr(decode, "left_pad", leak)
    got = decode.decode_batched(model, utts, batch_size=5, max_new_tokens=NEW_TOKENS)
    differ = [u.key for u in utts if got.token_ids[u.key] != ref.token_ids[u.key]]
    assert len(differ) >= 2, differ  # the longest has no padding; a short pad may not change the argmax


def test_left_pad_puts_the_padding_first():
    a, b = torch.ones(2, 3), torch.full((4, 3), 2.0)
    batch, mask = decode.left_pad([a, b], torch.float32)
    assert batch.shape == (2, 4, 3)
    assert mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    assert batch[0, :2].abs().sum() == 0 and torch.equal(batch[0, 2:], a) and torch.equal(batch[1], b)


def test_relative_paths_of_the_config_are_read_from_the_model_folder(tiny, tmp_path, monkeypatch):
    """As released: config.yaml names its LLM folder relatively; the working folder is elsewhere."""
    import shutil

    p = tinymodel.paths(tiny)
    folder = tmp_path / "Fun-ASR-Nano"
    shutil.copytree(p.llm_dir, folder / "Qwen3-0.6B")
    shutil.copy(p.model_pt, folder / "model.pt")
    (folder / "config.yaml").write_text(
        p.config.read_text(encoding="utf-8").replace(str(p.llm_dir), "Qwen3-0.6B")
    )
    monkeypatch.chdir(tmp_path)
    conf = decode.read_config(folder)
    assert conf["llm_conf"]["init_param_path"] == str(folder / "Qwen3-0.6B")
    assert conf["tokenizer_conf"]["init_param_path"] == str(folder / "Qwen3-0.6B")
    assert conf["model"] == "FunASRNano" and conf["llm"] == "Qwen3-tiny"  # names that are no file stay
