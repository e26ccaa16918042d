"""`ftenv export --format hf` on the tiny model fine-tuned on a few utterances: the folder loads
offline with transformers' `from_pretrained` and is the same model as the FunASR folder exported
from the same checkpoint (the same audio embeddings, the same greedy tokens); a planted wrong
mapping (two encoder layers swapped, the fused QKV split in the wrong order) is told apart; a
FunASR tensor neither mapped nor named as not used stops the export with exit 2 and nothing
written; `ftenv eval` scores the two folders identically and `ftenv transcribe` reads both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from ftenv import cli
from ftenv.evaluate import decode, hf_decode, hf_layout
from ftenv.model import folder as model_folder
from ftenv.outcome import UNUSABLE
from ftenv.selfcheck import tinymodel
from support.overfit import overfit, train_lines

NEW_TOKENS = 24


@pytest.fixture(scope="module")
def tuned(tiny, tmp_path_factory) -> dict:
    """A run folder with one checkpoint (the tiny model overfit on 3 utterances) and both exports."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("hfexport")
    run = root / "run"
    run.mkdir()
    lines = train_lines(tiny, 3)
    torch.save(overfit(tiny, lines), run / "model.pt.ep1")
    (run / "config.yaml").write_text(
        yaml.safe_dump({"model": str(tinymodel.paths(tiny).root), "output_dir": str(run)}), encoding="utf-8"
    )
    (root / "test.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    funasr, hf = root / "funasr", root / "hf"
    assert cli.main(["export", str(run), str(funasr)]) == 0
    assert cli.main(["export", str(run), str(hf), "--format", "hf"]) == 0
    wavs = [json.loads(x)["messages"][1]["content"].split("!")[1].split("<|")[0] for x in lines]
    yield {"root": root, "run": run, "funasr": funasr, "hf": hf, "wavs": wavs, "test": root / "test.jsonl"}
    torch.set_num_threads(threads)


def _utterances(wavs) -> list[decode.Utterance]:
    return [decode.Utterance(str(i), w) for i, w in enumerate(wavs)]


def _funasr_audio_embeddings(loaded, utt):
    p = decode._prepare(loaded, utt)
    with torch.no_grad():
        enc, lens = loaded.model.encode(p["speech"], p["speech_lengths"].reshape(-1))
        out, _ = loaded.model.audio_adaptor(enc, lens)
    return out[0]


def _hf_audio_embeddings(loaded, utt):
    inputs = loaded.processor.apply_transcription_request(audio=[hf_decode._audio(loaded, utt.audio)])
    with torch.no_grad():
        return loaded.model.get_audio_features(
            inputs["input_features"], inputs["input_features_mask"]
        ).pooler_output


def assert_same_model(funasr_dir: Path, hf_dir: Path, wavs) -> dict:
    """The HF folder is the FunASR folder's model: audio embeddings within float rounding (the
    features differ by FunASR's 2**15 sample scale, a constant the first layer norm removes), and
    FunASR's greedy tokens (upstream's one-at-a-time path) from transformers' batched generate."""
    funasr = decode.load_model(funasr_dir, device="cpu")
    hf = hf_decode.load(hf_dir, "cpu")
    utts = _utterances(wavs)
    for utt in utts:
        a, b = _funasr_audio_embeddings(funasr, utt), _hf_audio_embeddings(hf, utt)
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), float((a - b).abs().max())
    reference = decode.decode_one_by_one(funasr, utts, NEW_TOKENS)
    for size in (1, len(utts)):
        got = hf_decode.decode_batched(hf, utts, size, NEW_TOKENS)
        assert got.token_ids == reference.token_ids
        assert got.hypotheses == reference.hypotheses
    return reference.token_ids


@pytest.mark.slow  # the module's fixture fine-tunes the tiny model and exports it twice (~35 s)
def test_the_hf_folder_is_the_funasr_folders_model(tuned):
    files = sorted(p.name for p in tuned["hf"].iterdir())
    assert {"config.json", "model.safetensors", "chat_template.jinja", "README.md"} <= set(files), files
    assert model_folder.is_hf_folder(tuned["hf"]) and not model_folder.is_hf_folder(tuned["funasr"])
    config = json.loads((tuned["hf"] / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["FunAsrNanoForConditionalGeneration"]  # written by save_pretrained
    ids = assert_same_model(tuned["funasr"], tuned["hf"], tuned["wavs"])
    assert len({tuple(v) for v in ids.values()}) == len(ids)  # the utterances decode differently
    card = (tuned["hf"] / "README.md").read_text(encoding="utf-8")
    assert "FunAsrNanoForConditionalGeneration.from_pretrained" in card and "sha256" in card


@pytest.mark.slow  # the module's fixture fine-tunes the tiny model and exports it twice (~35 s)
@pytest.mark.parametrize("plant", ["qkv order", "layers swapped"])
def test_a_planted_wrong_mapping_is_told_apart(tuned, tmp_path, monkeypatch, plant):
    if plant == "qkv order":
        monkeypatch.setattr(hf_layout, "QKV_ORDER", ("k", "q", "v"))
    else:  # encoders.0 (layer 1) and tp_encoders.0 (layer 2): same shapes, so only the numbers tell
        swap = {1: 2, 2: 1}
        real = hf_layout.Layout.encoder_layer
        monkeypatch.setattr(
            hf_layout.Layout,
            "encoder_layer",
            lambda self, part, i: swap.get(real(self, part, i), real(self, part, i)),
        )
    out = tmp_path / "planted"
    assert cli.main(["export", str(tuned["run"]), str(out), "--format", "hf"]) == 0
    with pytest.raises(AssertionError) as caught:
        assert_same_model(tuned["funasr"], out, tuned["wavs"][:1])
    print(f"{plant}: {str(caught.value).splitlines()[0]}")  # the largest embedding difference (pytest -s)


@pytest.mark.slow  # the module's fixture fine-tunes the tiny model and exports it twice (~35 s)
def test_a_tensor_neither_mapped_nor_named_fails_the_export(tuned, tmp_path, monkeypatch, capsys):
    """A FunASR tensor the mapping does not know (here: the FSMN's, with its entry taken away) is
    refused by name, exit 2, nothing written beside OUT."""
    table = {k: v for k, v in hf_layout._IN_BLOCK.items() if k != "self_attn.fsmn_block."}
    monkeypatch.setattr(hf_layout, "_IN_BLOCK", table)
    out = tmp_path / "out"
    assert cli.main(["export", str(tuned["run"]), str(out), "--format", "hf"]) == UNUSABLE
    err = capsys.readouterr().err
    assert "fsmn_block" in err and "no place in transformers' Fun-ASR-Nano" in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_ctc_branch_is_named_not_used():
    layout = hf_layout.Layout(num_blocks=2, tp_blocks=1)
    weights = {"ctc_decoder.linear.weight": torch.zeros(2, 2), "audio_adaptor.linear1.bias": torch.zeros(2)}
    mapped, unused = hf_layout.map_weights(weights, layout)
    assert unused == ["ctc_decoder.linear.weight"]
    assert list(mapped) == ["model.multi_modal_projector.linear_1.bias"]


def test_a_config_transformers_cannot_express_is_refused(tiny, tmp_path, capsys):
    base = tmp_path / "base"
    root = tinymodel.paths(tiny)
    base.mkdir()
    conf = yaml.safe_load(root.config.read_text(encoding="utf-8"))
    conf["audio_adaptor_conf"]["downsample_rate"] = 2
    conf["audio_adaptor_conf"]["ffn_dim"] = 128
    (base / "config.yaml").write_text(yaml.safe_dump(conf), encoding="utf-8")
    # The checkpoint fits the model this config builds: linear1 takes two stacked frames.
    from ftenv.evaluate.export import _meta_model

    state = {
        k: torch.zeros(v.shape) for k, v in _meta_model(json.loads(json.dumps(conf))).state_dict().items()
    }
    torch.save(state, base / "model.pt")
    out = tmp_path / "out"
    assert (
        cli.main(["export", str(base / "model.pt"), str(out), "--base", str(base), "--format", "hf"])
        == UNUSABLE
    )
    err = capsys.readouterr().err
    assert "downsample_rate 2" in err and "--format funasr" in err, err
    assert not out.exists()


@pytest.mark.slow  # the module's fixture fine-tunes the tiny model and exports it twice (~35 s)
def test_eval_scores_the_hf_folder_as_the_funasr_folder(tuned, tmp_path, capsys):
    out = tmp_path / "eval"
    argv = ["eval", str(tuned["test"]), str(tuned["funasr"]), str(tuned["hf"]), "--out", str(out)]
    assert cli.main([*argv, "--device", "cpu", "--max-new-tokens", str(NEW_TOKENS), "--batch-size", "3"]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rows = {m["label"]: m for m in summary["models"]}
    assert set(rows) == {"funasr", "hf"}
    keys = ("error_rate", "substitutions", "deletions", "insertions", "reference_tokens", "utterances")
    assert {k: rows["hf"][k] for k in keys} == {k: rows["funasr"][k] for k in keys}
    assert rows["hf"]["error_rate"] < 0.2  # the fine-tune shows through both
    hyps = [(out / f"{m}.hyp.txt").read_text(encoding="utf-8") for m in ("funasr", "hf")]
    assert hyps[0] == hyps[1]
    capsys.readouterr()
    wav = tuned["wavs"][0]
    assert cli.main(["transcribe", str(tuned["hf"]), wav, "--device", "cpu", "--max-new-tokens", "24"]) == 0
    from_hf = capsys.readouterr().out
    assert (
        cli.main(["transcribe", str(tuned["funasr"]), wav, "--device", "cpu", "--max-new-tokens", "24"]) == 0
    )
    assert from_hf == capsys.readouterr().out and from_hf.strip()


def test_the_mapping_fills_transformers_model_at_the_released_sizes(tiny, tmp_path):
    """At Fun-ASR-Nano-2512's sizes (50 + 20 encoder blocks, 2 adaptor layers, Qwen3-0.6B), on the
    meta device: FunASR's 1,261 tensors become exactly transformers' model's, in its shapes."""
    from transformers import FunAsrNanoForConditionalGeneration

    from ftenv.evaluate.export import _meta_model

    root = tinymodel.paths(tiny)
    llm = tmp_path / "Qwen3-0.6B"
    llm.mkdir()
    qwen = json.loads((root.llm_dir / "config.json").read_text(encoding="utf-8"))
    qwen.update(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28)
    qwen.update(num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True)
    (llm / "config.json").write_text(json.dumps(qwen), encoding="utf-8")
    conf = yaml.safe_load(root.config.read_text(encoding="utf-8"))
    conf["audio_encoder_conf"].update(
        output_size=512, attention_heads=4, linear_units=2048, num_blocks=50, tp_blocks=20
    )
    conf["audio_adaptor_conf"].update(ffn_dim=2048, n_layer=2, attention_heads=8)
    conf["llm_conf"]["init_param_path"] = str(llm)
    state = _meta_model(json.loads(json.dumps(conf))).state_dict()
    config, layout = hf_layout.hf_config(conf, llm, 151646, "float32")
    mapped, unused = hf_layout.map_weights(state, layout)
    with torch.device("meta"):
        own = FunAsrNanoForConditionalGeneration(config).state_dict()
    assert len(state) == 1261 and unused == []
    assert mapped.keys() == own.keys()
    assert all(mapped[k].shape == own[k].shape for k in own)
