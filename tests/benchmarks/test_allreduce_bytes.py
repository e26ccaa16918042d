"""benchmarks/allreduce_bytes.py on the tiny model: what it counts is the recipe's trainable part
(the LLM, in its bf16), whatever the folder's own freeze settings say, and the ring all-reduce's
arithmetic. The guide's numbers for the real model come from the same code (docs/network.md)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from benchmarks import allreduce_bytes as bench


def _llm_params(llm_dir) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(llm_dir))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.slow  # its setup builds the session's tiny model when it runs first
def test_counts_the_llm_in_bf16_as_the_recipe_trains_it(tiny, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(tiny, folder, ignore=shutil.ignore_patterns("data", "model.pt"))
    conf = yaml.safe_load((folder / "config.yaml").read_text())
    # The folder says otherwise: the recipe's overrides win, as on the command line.
    conf["llm_conf"]["freeze"] = True
    conf["audio_encoder_conf"]["freeze"] = False
    (folder / "config.yaml").write_text(yaml.safe_dump(conf))
    result = bench.trainable(bench.recipe_config(folder))
    llm = _llm_params(conf["llm_conf"]["init_param_path"])
    assert result["trainable_params"] == llm > 0
    assert result["allreduce_bytes"] == 2 * llm  # bf16 gradients
    assert result["parts"]["llm"]["dtype"] == ["bfloat16"]
    assert result["parts"]["audio_encoder"]["trainable"] == 0 < result["parts"]["audio_encoder"]["params"]
    assert result["parts"]["audio_adaptor"]["trainable"] == 0


def test_ring_arithmetic():
    assert bench.ring_seconds(10**9, 1, 400) == 0
    assert bench.ring_seconds(10**9, 2, 100) == pytest.approx(10**9 / 12.5e9)  # 2(n-1)/n = 1
    assert bench.ring_seconds(10**9, 4, 400) == pytest.approx(1.5 * 10**9 / 50e9)
    rows = bench.table(10**9, 0.1, rates=(400,), nodes=(4,))
    assert rows[0]["share_of_step"] == pytest.approx(0.3)
    assert rows[0]["samples_per_s_vs_one_node"] == pytest.approx(4 * 0.1 / 0.13)


def test_main_refuses_a_folder_without_config(tmp_path, capsys):
    assert bench.main([str(tmp_path)]) == 2
    assert f"{tmp_path}/config.yaml not found" in capsys.readouterr().err
