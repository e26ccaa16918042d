"""The released-layout fixture's builder (imagetools/fixture/released.py) without building the 2 GB
folder: its sources come from the pinned packages only, a missing or mismatched one is refused with
the install named, a layout is reused only while its sources and the builder stay the same, and the
tokenizer it writes from qwen.tiktoken gives Qwen3's ids (the full build runs in
tests/container/test_released_layout_image.py)."""

from __future__ import annotations

import importlib.metadata
import json
import tomllib

import pytest

from imagetools import __main__ as imagetools_main
from imagetools.fixture import released
from support import ROOT


def test_the_sources_are_versions_tomls_pins():
    pinned = tomllib.loads((ROOT / "versions.toml").read_text())["layout_sources"]
    assert released.requirements() == [f"{k}=={v}" for k, v in pinned.items()]
    assert set(pinned) == set(released.SOURCES)


def test_the_make_venv_step_installs_them_without_their_dependencies():
    makefile = (ROOT / "Makefile").read_text()
    assert (
        "pip install -q --no-deps $$(PYTHONPATH=scripts $(PY) -m imagetools released-layout --requirements)"
        in (makefile)
    )


def test_a_missing_source_package_is_refused_naming_the_install(monkeypatch, capsys, tmp_path):
    real = importlib.metadata.distribution

    def without_dashscope(name):
        if name == "dashscope":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_dashscope)
    version = released.pins()["dashscope"]
    out = tmp_path / "never-written"
    assert imagetools_main.main(["released-layout", "--out", str(out)]) == 2
    assert not any(tmp_path.iterdir()), "nothing is written before the sources are there"
    err = capsys.readouterr().err
    assert f"the package dashscope is not installed: pip install --no-deps dashscope=={version}" in err


def test_another_version_of_a_source_is_refused(monkeypatch):
    class Other:
        version = "0.0.1"

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Other())
    with pytest.raises(released.SourceMissing, match=r"0\.0\.1 is installed, versions.toml pins"):
        released.sources()


def test_a_layout_is_reused_only_while_its_sources_and_builder_are_the_same(tmp_path):
    found = released.sources()
    assert not released.is_current(tmp_path, found)  # nothing built there
    stamp = released.stamp_of(found)
    (tmp_path / released.STAMP).write_text(json.dumps(stamp | {"tokens": 1}))
    assert released.is_current(tmp_path, found)
    changed = json.loads(json.dumps(stamp))
    changed["own"]["released_config.yaml"] = "0" * 64  # the config changed since
    (tmp_path / released.STAMP).write_text(json.dumps(changed))
    assert not released.is_current(tmp_path, found)


def test_the_config_is_the_released_one_with_its_ctc_branch_and_relative_paths():
    import yaml

    conf = yaml.safe_load(released.released_config_text())
    assert conf["model"] == "FunASRNano" and conf["ctc_decoder"] == "Transformer"
    assert conf["llm_conf"]["init_param_path"] == released.LLM_DIR
    assert conf["tokenizer_conf"]["init_param_path"] == "${llm_conf.init_param_path}"
    assert conf["dataset_conf"]["ctc_tokenizer_conf"] == {
        "vocab_path": None,
        "is_multilingual": True,
        "num_languages": 8749,
    }
    metas = released.configuration()["file_path_metas"]
    assert metas["dataset_conf"]["ctc_tokenizer_conf"]["vocab_path"] == released.CTC_VOCAB


@pytest.mark.slow
def test_the_tokenizer_from_qwen_tiktoken_gives_qwen3s_ids(tmp_path):
    """Qwen2/Qwen3's well-known encoding of a ChatML system turn, and the added tokens' ids."""
    from transformers import AutoTokenizer

    qwen = json.loads(released.QWEN_SOURCE.read_text(encoding="utf-8"))
    assert released.write_tokenizer(tmp_path, released.sources()["dashscope"], qwen) == 151669
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    assert type(tok).__name__ == "Qwen2Tokenizer"
    ids = tok.encode("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
    assert ids == [151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198]
    assert tok.eos_token_id == 151645 and tok.pad_token_id == 151643
    assert tok.convert_tokens_to_ids("</think>") == 151668
    assert tok.decode(tok.encode("语音转写：你好 123")) == "语音转写：你好 123"
