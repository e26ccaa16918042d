"""The model folder checked like the data (`ftenv data check --model-dir`, `ftenv finetune`): the LLM
and tokenizer files config.yaml points to, and a model.pt without the trained CTC weights that
config.yaml configures (read from the state dict's keys)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import yaml

from ftenv import cli
from ftenv.model import folder as model_folder
from ftenv.selfcheck import tinymodel


@pytest.fixture
def copy(tiny, tmp_path) -> Path:
    """The tiny model copied as a downloaded folder is: LLM and tokenizer paths relative to it."""
    out = tmp_path / "model"
    shutil.copytree(tiny, out, ignore=shutil.ignore_patterns("data"))
    conf = yaml.safe_load((out / "config.yaml").read_text())
    conf["llm_conf"]["init_param_path"] = conf["tokenizer_conf"]["init_param_path"] = "Qwen3-tiny"
    (out / "config.yaml").write_text(yaml.safe_dump(conf))
    return out


def _finetune(tiny: Path, model: Path, tmp_path: Path, monkeypatch) -> list[str]:
    monkeypatch.setenv("FTENV_REPORT", "0")
    p = tinymodel.paths(tiny)
    return [
        "finetune", "--model-dir", str(model), "--train", str(p.train_jsonl), "--valid", str(p.val_jsonl),
        "--output-dir", str(tmp_path / "out"), "--gpus-per-node", "1", "--dry-run",
    ]  # fmt: skip


def test_a_complete_folder_has_no_problem(copy, tmp_path):
    assert model_folder.inspect(copy, tmp_path) == []


def test_a_folder_missing_its_decoder_files_is_refused(tiny, copy, tmp_path, monkeypatch, capsys):
    shutil.rmtree(copy / "Qwen3-tiny")
    messages = [p.message for p in model_folder.inspect(copy, tmp_path) if p.severity == "error"]
    assert len(messages) == 2
    assert "llm_conf.init_param_path Qwen3-tiny (the LLM decoder) is not found" in messages[0]
    assert "tokenizer_conf.init_param_path" in messages[1]
    train = tinymodel.paths(tiny).train_jsonl
    argv = [
        "data",
        "check",
        "--model-dir",
        str(copy),
        "--output-dir",
        str(tmp_path),
        "--jobs",
        "1",
        str(train),
    ]
    assert cli.main(argv) == 2
    assert "model: error: llm_conf.init_param_path Qwen3-tiny" in capsys.readouterr().err
    assert cli.main(_finetune(tiny, copy, tmp_path, monkeypatch)) == 2
    assert "(the LLM decoder) is not found" in capsys.readouterr().err
    (copy / "Qwen3-tiny").mkdir()
    (copy / "Qwen3-tiny" / "config.json").write_text("{}")  # the LLM's config but no tokenizer files
    messages = [p.message for p in model_folder.inspect(copy, tmp_path)]
    assert messages == [
        f"tokenizer_conf.init_param_path {copy / 'Qwen3-tiny'} (the tokenizer) has no tokenizer.json or "
        "vocab.json+merges.txt or tokenizer.model: an incomplete copy?"
    ]


@pytest.mark.parametrize("has_ctc", [False, True])
def test_a_model_pt_without_the_ctc_weights_is_flagged(tiny, copy, tmp_path, monkeypatch, capsys, has_ctc):
    conf = yaml.safe_load((copy / "config.yaml").read_text())
    conf["ctc_decoder"] = "Transformer"
    (copy / "config.yaml").write_text(yaml.safe_dump(conf))
    state = {"audio_encoder.embed.weight": torch.zeros(2), "llm.model.norm.weight": torch.zeros(2)}
    if has_ctc:
        state |= {"ctc_decoder.blocks.0.norm1.weight": torch.zeros(2), "ctc.ctc_lo.weight": torch.zeros(2)}
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, copy / "model.pt")
    found = model_folder.inspect(copy, tmp_path)
    if has_ctc:
        assert found == []
        return
    assert [p.severity for p in found] == ["warning"]
    assert "has no ctc_decoder.* / ctc.* weights" in found[0].message and "#3208" in found[0].message
    assert cli.main(_finetune(tiny, copy, tmp_path, monkeypatch)) == 0  # a warning: the run may go on
    assert "model: warning: " in capsys.readouterr().err


def _sentencepiece(folder: Path) -> None:
    """A SentencePiece tokenizer.model (all the tokenizer files the folder gets)."""
    import sentencepiece

    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(["hello world this is a test of the tokenizer", "几点了 你好"] * 50))
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(folder / "tokenizer"), vocab_size=25, minloglevel=2
    )
    corpus.unlink()
    (folder / "tokenizer.vocab").unlink()


@pytest.mark.parametrize("files", ["tokenizer.model", "tokenizer_config.json"])
def test_a_tokenizer_folder_is_judged_alike_by_every_command(
    tiny, copy, tmp_path, monkeypatch, capsys, files
):
    """A tokenizer folder with only a SentencePiece tokenizer.model (AutoTokenizer loads it) passes
    `ftenv data check --model-dir`, finetune's check, the eval's model build and `ftenv export`;
    one with only tokenizer_config.json (it loads an empty vocabulary) is refused by all four."""
    from ftenv.evaluate import decode
    from ftenv.launch.inputs import check_model_dir
    from ftenv.model.folder import ModelLoadError

    (copy / "tok").mkdir()
    if files == "tokenizer.model":
        _sentencepiece(copy / "tok")
    else:
        (copy / "tok" / "tokenizer_config.json").write_text('{"tokenizer_class": "Qwen2Tokenizer"}')
    conf = yaml.safe_load((copy / "config.yaml").read_text())
    conf["tokenizer_conf"]["init_param_path"] = "tok"
    (copy / "config.yaml").write_text(yaml.safe_dump(conf))
    accepted = files == "tokenizer.model"
    train = str(tinymodel.paths(tiny).train_jsonl)
    check = ["data", "check", "--model-dir", str(copy), "--output-dir", str(tmp_path), "--jobs", "1", train]
    verdicts = {"data check": cli.main(check) == 0, "finetune": check_model_dir(copy, tmp_path) == []}
    try:
        verdicts["eval"] = decode.build(copy, "cpu").tokenizer is not None
    except ModelLoadError:
        verdicts["eval"] = False
    out = tmp_path / "exported"
    verdicts["export"] = cli.main(["export", str(copy / "model.pt"), str(out), "--base", str(copy)]) == 0
    assert verdicts == dict.fromkeys(verdicts, accepted), capsys.readouterr().err
    if accepted:
        assert (out / "tok" / "tokenizer.model").is_file()


def test_configuration_json_names_the_files_config_yaml_leaves_empty(copy):
    """The released config.yaml says `vocab_path: null` for the CTC tokenizer and its
    configuration.json names multilingual.tiktoken: read as FunASR merges them, the file wins when it
    is in the folder (a missing one leaves config.yaml's value), and load_config makes it absolute."""
    import json

    conf = yaml.safe_load((copy / "config.yaml").read_text())
    conf["dataset_conf"]["ctc_tokenizer_conf"] = {"vocab_path": None, "is_multilingual": True}
    (copy / "config.yaml").write_text(yaml.safe_dump(conf))
    metas = {
        "init_param": "model.pt",
        "dataset_conf": {"ctc_tokenizer_conf": {"vocab_path": "vocab.tiktoken"}},
    }
    (copy / "configuration.json").write_text(json.dumps({"file_path_metas": metas}))
    assert model_folder.read_config(copy)["dataset_conf"]["ctc_tokenizer_conf"]["vocab_path"] is None
    (copy / "vocab.tiktoken").write_text("IQ== 0\n")
    read = model_folder.read_config(copy)
    assert read["dataset_conf"]["ctc_tokenizer_conf"] == {
        "vocab_path": "vocab.tiktoken",
        "is_multilingual": True,
    }
    assert "init_param" not in read  # config.yaml's and model.pt are the folder's own, not settings
    located = model_folder.load_config(copy)
    assert located["dataset_conf"]["ctc_tokenizer_conf"]["vocab_path"] == str(copy / "vocab.tiktoken")


def test_an_empty_path_setting_names_nothing(copy):
    """The released config.yaml's `llm_conf.lora_conf.init_param_path: ""` is no file: taken for the
    model folder itself, `ftenv export` copied the folder into its own output and failed."""
    from ftenv.evaluate.model_files import model_files

    assert model_folder.locate("", copy, copy) is None
    conf = model_folder.read_config(copy)
    conf["llm_conf"]["lora_conf"] = {"init_param_path": ""}
    files = model_files(model_folder.located(conf, copy, copy), copy)
    assert ("llm_conf", "lora_conf", "init_param_path") not in files
    assert {name for _path, name in files.values()} == {"Qwen3-tiny"}
