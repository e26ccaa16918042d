"""ftenv tinymodel: the tiny offline Fun-ASR-Nano is complete, offline, deterministic, and keeps the
LLM attention path of the real model (sdpa, bf16, padded mask, head size cuDNN accepts)."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from ftenv import cli
from ftenv.selfcheck import tinymodel


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    return tinymodel.build(a), tinymodel.build(b)


def _digest(path, root=None) -> str:
    data = path.read_bytes()
    if root is not None:  # JSONL and config.yaml name their own absolute paths
        data = data.replace(str(root).encode(), b"ROOT")
    return hashlib.sha256(data).hexdigest()


def test_layout_and_config(two_builds):
    p, _ = two_builds
    for f in (p.config, p.model_pt, p.train_jsonl, p.val_jsonl, p.llm_dir / "config.json"):
        assert f.is_file(), f
    assert tinymodel.is_built(p.root)
    conf = yaml.safe_load(p.config.read_text())
    assert conf["model"] == "FunASRNano"
    assert conf["audio_encoder"] == "SenseVoiceEncoderSmall" and conf["audio_adaptor"] == "Transformer"
    assert "hub" not in conf["audio_encoder_conf"]  # hub: ms would download an encoder
    assert conf["llm_conf"]["init_param_path"] == str(p.llm_dir)  # absolute: never a hub id
    assert conf["llm_conf"]["llm_dtype"] == "bf16"
    assert "ctc_decoder" not in conf  # needs a tiktoken file the wheel does not ship
    llm = json.loads((p.llm_dir / "config.json").read_text())
    assert llm["model_type"] == "qwen3"
    assert llm["head_dim"] % 8 == 0 and llm["head_dim"] <= 128  # cuDNN attention eligible
    assert "attn_implementation" not in llm  # transformers' default: sdpa


def test_data_is_the_recipe_chatml_jsonl(two_builds):
    p, _ = two_builds
    lines = [json.loads(x) for x in p.train_jsonl.read_text().splitlines()]
    assert len(lines) == 48
    sums = set()
    for d in lines:
        roles = [m["role"] for m in d["messages"]]
        assert roles == ["system", "user", "assistant"]
        user = d["messages"][1]["content"]
        wav = user.split("<|startofspeech|>!")[1].split("<|endofspeech|>")[0]
        assert wav.startswith(str(p.wav_dir)) and (p.wav_dir / wav.rsplit("/", 1)[1]).is_file()
        assert d["speech_length"] > 0 and d["text_length"] > 0
        sums.add(d["speech_length"] + d["text_length"])
    assert len(sums) == len(lines)  # no ties: the sampler's batches repeat exactly each epoch


def test_tokenizer_has_chatml_tokens_and_fits_the_llm(two_builds):
    from transformers import AutoTokenizer

    p, _ = two_builds
    tok = AutoTokenizer.from_pretrained(str(p.llm_dir))
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        ids = tok.encode(special)
        assert len(ids) == 1, special  # one token each, never split
    assert len(tok) <= tinymodel.LLM_CONFIG["vocab_size"]


def test_deterministic(two_builds):
    a, b = two_builds
    for rel in ("model.pt", "Qwen3-tiny/tokenizer.json", "Qwen3-tiny/config.json", "data/wav/utt0007.wav"):
        assert _digest(a.root / rel) == _digest(b.root / rel), rel
    for rel in ("config.yaml", "data/train.jsonl", "data/valid.jsonl"):
        assert _digest(a.root / rel, a.root) == _digest(b.root / rel, b.root), rel


def test_model_loads_offline_through_funasr_automodel(two_builds, monkeypatch):
    import socket

    p, _ = two_builds

    def no_network(*args, **kwargs):
        raise AssertionError("tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    tinymodel.quiet_funasr_import()
    from funasr import AutoModel

    am = AutoModel(model=str(p.root), device="cpu", disable_update=True, disable_log=True)
    model = am.model
    assert type(model).__name__ == "FunASRNano"
    assert model.llm.config._attn_implementation == "sdpa"
    trainable = {n.split(".")[0] for n, q in model.named_parameters() if q.requires_grad}
    assert trainable == {"llm"}  # encoder and adaptor frozen, as the recipe


def test_cli(tmp_path, capsys):
    assert cli.main(["tinymodel", str(tmp_path / "t"), "--n-train", "12", "--n-val", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["root"] == str(tmp_path / "t")
    assert len((tmp_path / "t" / "data" / "train.jsonl").read_text().splitlines()) == 12
