"""A LoRA run end to end on the tiny model (`ftenv finetune` with FunASR's own overrides, CPU, one
epoch of a few steps at a learning rate that moves the adapters far from their zero start): with
`lora_only` only the adapters change, without it the decoder's weights train too; `ftenv eval` puts
the checkpoint beside the base (two rows, other transcripts); `ftenv export` folds the adapters in
both formats into a folder without LoRA whose greedy tokens are the LoRA model's; a checkpoint away
from its run's config.yaml is refused with the fix named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from ftenv import cli
from ftenv.evaluate import arguments, decode, hf_decode
from ftenv.model import checkpoints
from ftenv.outcome import UNUSABLE
from ftenv.selfcheck import tinymodel
from ftenv.trainer.funasr_cpu_shim import CPU_OVERRIDES
from support import child_env, finetune_tiny

pytestmark = pytest.mark.slow

LORA = ("++llm_conf.use_lora=true", "++llm_conf.lora_conf.r=4")
#: One epoch in a few steps; a learning rate at which Adam moves each adapter weight by about 0.05 a
#: step (no warm-up), so that B (zero at the start) changes the decoder's output (alpha/r = 8).
SHORT = (
    "++train_conf.max_epoch=1",
    "++dataset_conf.batch_size=4000",
    "++optim_conf.lr=0.05",
    "++scheduler_conf.warmup_steps=1",
)
TOKENS = 12


@pytest.fixture(scope="module")
def runs(tiny, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("lora")
    env = child_env(FTENV_FUNASR_CPU_SHIM="1", FTENV_WATCH="0", FTENV_REPORT="0", OMP_NUM_THREADS="1")
    made = {}
    for name, extra in (("only", ("++lora_only=true",)), ("with_decoder", ())):
        r = finetune_tiny(tiny, out / name, *CPU_OVERRIDES, *SHORT, *LORA, *extra, env=env, timeout=600)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        made[name] = (out / name, r.stderr)
    return {"out": out, "base": tinymodel.paths(tiny).root, "tiny": tiny, **made}


def _weights(path: Path) -> dict:
    return checkpoints.read_weights(path)


def test_lora_only_trains_the_adapters_alone_and_without_it_the_decoder_too(runs):
    base = _weights(runs["base"] / "model.pt")
    only = _weights(runs["only"][0] / "model.pt.ep1")
    adapters = sorted(k for k in only if ".lora_" in k)
    assert len(adapters) == 8  # q_proj and v_proj of the 2 decoder layers, A and B each
    assert set(only) - set(adapters) == set(base)
    assert all(torch.equal(only[k], base[k]) for k in base), "lora_only changed a base weight"
    assert all(only[k].abs().max() > 0.05 for k in adapters if k.endswith("lora_B")), "B never trained"
    assert "every other weight is frozen (lora_only=true)" in runs["only"][1]

    full = _weights(runs["with_decoder"][0] / "model.pt.ep1")
    changed = {k for k in base if not torch.equal(full[k], base[k])}
    assert changed and all(k.startswith("llm.") for k in changed), sorted(changed)[:5]
    assert any(".mlp." in k for k in changed)  # the decoder's own weights, not only the targeted ones
    assert "the adapters AND every decoder weight train" in runs["with_decoder"][1]


def _tokens(loaded, way, tiny: Path) -> dict[str, list[int]]:
    wavs = sorted(tinymodel.paths(tiny).wav_dir.glob("*.wav"))[:4]
    wanted = [decode.Utterance(w.stem, str(w)) for w in wavs]
    return way.decode_batched(loaded, wanted, 4, TOKENS).token_ids


def test_eval_puts_the_lora_checkpoint_beside_the_base(runs, tmp_path, capsys):
    checkpoint = runs["only"][0] / "model.pt.ep1"
    valid = tinymodel.paths(runs["tiny"]).val_jsonl
    argv = ["eval", str(valid), str(runs["base"]), str(checkpoint), "--out", str(tmp_path / "ev")]
    assert cli.main([*argv, "--max-new-tokens", str(TOKENS)]) == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "ev/summary.json").read_text())
    assert [m["label"] for m in summary["models"]] == [runs["base"].name, "model.pt.ep1"]
    hyps = [(tmp_path / "ev" / f"{m['label']}.hyp.txt").read_text() for m in summary["models"]]
    assert hyps[0] != hyps[1]


def test_export_folds_the_adapters_in_both_formats_into_the_lora_models_tokens(runs, tmp_path, capsys):
    checkpoint = runs["only"][0] / "model.pt.ep1"
    (choice,) = arguments.choose([str(checkpoint)]).models
    assert choice.adapters is not None and choice.model_dir == runs["base"]
    lora_model = decode.load_model(choice.model_dir, choice.weights, "cpu", choice.adapters)
    expected = _tokens(lora_model, decode, runs["tiny"])
    # The base's weights are the checkpoint's without its adapters: an export that skipped the fold.
    assert _tokens(decode.load_model(runs["base"], device="cpu"), decode, runs["tiny"]) != expected

    funasr_out, hf_out = tmp_path / "funasr", tmp_path / "hf"
    assert cli.main(["export", str(checkpoint), str(funasr_out)]) == 0, capsys.readouterr().err
    assert cli.main(["export", str(checkpoint), str(hf_out), "--format", "hf"]) == 0, capsys.readouterr().err
    llm_conf = yaml.safe_load((funasr_out / "config.yaml").read_text())["llm_conf"]
    assert llm_conf["use_lora"] is False and "lora_conf" not in llm_conf
    from safetensors.torch import load_file

    shipped = torch.load(funasr_out / "model.pt", weights_only=True)
    for names in (shipped, load_file(hf_out / "model.safetensors")):
        assert not [k for k in names if "lora_" in k]
    for folder in (funasr_out, hf_out):  # the card says what was folded
        said = "- LoRA: the adapters of 4 decoder layers (q_proj, v_proj; r 4, lora_alpha 32) are folded"
        assert said in (folder / "README.md").read_text()
    folded, hf = decode.load_model(funasr_out, device="cpu"), hf_decode.load(hf_out, "cpu")
    assert _tokens(folded, decode, runs["tiny"]) == expected
    assert _tokens(hf, hf_decode, runs["tiny"]) == expected
    # Greedy tokens of a tiny model can survive a wrong alpha/r; the decoder's logits cannot.
    x = torch.randn(2, 7, lora_model.model.llm.config.hidden_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        reference = lora_model.model.llm(inputs_embeds=x).logits
        torch.testing.assert_close(folded.model.llm(inputs_embeds=x).logits, reference, rtol=1e-4, atol=1e-4)
        hidden = hf.model.model.language_model(inputs_embeds=x).last_hidden_state
        # transformers' Qwen3 and FunASR's differ by float32 rounding (2e-4 measured); a wrong
        # alpha/r differs by about 2.
        torch.testing.assert_close(hf.model.lm_head(hidden), reference, rtol=1e-3, atol=1e-3)

    wavs = [str(w) for w in sorted(tinymodel.paths(runs["tiny"]).wav_dir.glob("*.wav"))[:4]]
    capsys.readouterr()
    assert cli.main(["transcribe", str(checkpoint), *wavs, "--max-new-tokens", str(TOKENS)]) == 0
    from_checkpoint = capsys.readouterr().out  # built with the run's LoRA settings, as eval does
    assert cli.main(["transcribe", str(funasr_out), *wavs, "--max-new-tokens", str(TOKENS)]) == 0
    assert capsys.readouterr().out == from_checkpoint
    assert cli.main(["transcribe", str(runs["base"]), *wavs, "--max-new-tokens", str(TOKENS)]) == 0
    assert capsys.readouterr().out != from_checkpoint

    from funasr import AutoModel  # FunASR's own loader builds it without LoRA and takes every tensor

    auto = AutoModel(model=str(funasr_out), device="cpu", disable_update=True, disable_pbar=True)
    state = auto.model.state_dict()
    assert state.keys() == shipped.keys()  # in the decoder's dtype of config.yaml (llm_dtype)
    assert all(torch.equal(state[k], shipped[k].to(state[k].dtype)) for k in shipped)


def test_a_lora_checkpoint_away_from_its_run_config_is_refused_naming_the_fix(runs, tmp_path, capsys):
    away = tmp_path / "elsewhere" / "model.pt.best"
    away.parent.mkdir()
    shutil.copy2(runs["only"][0] / "model.pt.ep1", away)
    valid = tinymodel.paths(runs["tiny"]).val_jsonl
    capsys.readouterr()
    argv = ["eval", str(valid), str(runs["base"]), str(away), "--out", str(tmp_path / "ev")]
    assert cli.main(argv) == UNUSABLE
    err = capsys.readouterr().err
    assert "8 LoRA adapter tensors" in err and "keep the checkpoint in its run folder" in err
    assert cli.main(["export", str(away), str(tmp_path / "x"), "--base", str(runs["base"])]) == UNUSABLE
    assert "8 LoRA adapter tensors" in capsys.readouterr().err
