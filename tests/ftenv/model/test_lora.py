"""The fold of FunASR's LoRA layers into plain weights (ftenv.model.lora): a plain layer given the
folded weight computes what upstream's funasr.models.lora.layers.Linear computes, in either weight
layout and at any alpha/r; a run's LoRA settings read from its config.yaml; a checkpoint with
adapters and no run config refused with the fix named."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ftenv.model import checkpoints, lora
from ftenv.model.folder import ModelLoadError


def _lora_model(fan_in_fan_out: bool, r: int, alpha: int) -> torch.nn.Module:
    from funasr.models.lora.layers import Linear

    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("q_proj", Linear(8, 6, r=r, lora_alpha=alpha, fan_in_fan_out=fan_in_fan_out))
    with torch.no_grad():
        model.q_proj.lora_B.normal_()  # upstream starts B at zero: the fold would not show
    return model.eval()


@pytest.mark.parametrize(("fan_in_fan_out", "r", "alpha"), [(False, 4, 32), (True, 2, 3)])
def test_a_plain_layer_with_the_folded_weight_computes_the_lora_layer(fan_in_fan_out, r, alpha):
    model = _lora_model(fan_in_fan_out, r, alpha)
    x = torch.randn(5, 8)
    expected = model(x)  # unmerged: W x + (B A x) * alpha / r
    folded = lora.fold(model, model.state_dict())
    assert lora.adapter_names(folded) == [] and set(folded) == {"q_proj.weight", "q_proj.bias"}
    weight = folded["q_proj.weight"].T if fan_in_fan_out else folded["q_proj.weight"]
    plain = torch.nn.functional.linear(x, weight, folded["q_proj.bias"])
    torch.testing.assert_close(plain, expected)
    unfolded = torch.nn.functional.linear(x, model.q_proj.weight.T if fan_in_fan_out else model.q_proj.weight)
    assert not torch.allclose(unfolded + model.q_proj.bias, expected, atol=1e-3)


def test_adapters_without_a_lora_layer_are_refused():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    state = {**model.state_dict(), "0.lora_A": torch.ones(1, 2), "0.lora_B": torch.ones(2, 1)}
    with pytest.raises(ValueError, match="LoRA tensors without a LoRA layer"):
        lora.fold(model, state)


def test_the_run_config_gives_the_settings_and_the_export_config_none():
    run = {"llm_conf": {"use_lora": True, "lora_conf": {"r": 4}, "freeze": False}, "lora_only": True}
    adapters = lora.of_run(run)
    assert adapters == lora.of_run(run) and hash(adapters) == hash(lora.of_run(run))
    base = {"llm_conf": {"init_param_path": "Qwen3-0.6B", "use_lora": False}}
    built = lora.applied(base, adapters)
    assert built["llm_conf"] == {"init_param_path": "Qwen3-0.6B", "use_lora": True, "lora_conf": {"r": 4}}
    assert base["llm_conf"]["use_lora"] is False  # the base's config is not changed
    assert lora.without({**built, "lora_only": True}) == {
        "llm_conf": {"init_param_path": "Qwen3-0.6B", "use_lora": False}
    }
    assert lora.of_run({"llm_conf": {"use_lora": False, "lora_conf": {"r": 4}}}) is None
    assert lora.of_run({}) is None


def test_a_lora_checkpoint_on_a_model_without_adapters_names_the_run_config():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    state = {**model.state_dict(), "0.lora_A": torch.ones(1, 2), "0.lora_B": torch.ones(2, 1)}
    with pytest.raises(ModelLoadError) as caught:
        checkpoints.check_fit(model, state, Path("elsewhere/model.pt.best"))
    said = str(caught.value)
    assert "2 LoRA adapter tensors" in said and "config.yaml" in said and "use_lora: true" in said
    with pytest.raises(ModelLoadError, match="base model folder the run was fine-tuned from"):
        checkpoints.check_fit(model, {**model.state_dict(), "1.weight": torch.ones(1)}, Path("x"))


def test_the_fold_refuses_a_funasr_whose_lora_merge_changed(monkeypatch):
    """The fold copies upstream's merge (funasr.models.lora.layers.Linear.eval): against another
    merge it folds nothing and says why, since no upstream fold could run in its place."""
    from funasr.models.lora.layers import Linear

    model = _lora_model(False, 4, 32)

    def merged_another_way(self):
        return self

    monkeypatch.setattr(Linear, "eval", merged_another_way)
    with pytest.raises(
        ValueError, match=r"funasr\.models\.lora\.layers:Linear\.eval changed .*nothing folded"
    ):
        lora.fold(model, model.state_dict())
