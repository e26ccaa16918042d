"""What a model argument means (a model folder, a run's folder, a checkpoint file) and how weights
are read from what FunASR's trainer writes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from ftenv.evaluate import arguments
from ftenv.model import checkpoints
from ftenv.model.folder import ModelLoadError


def _model_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.yaml").write_text("model: FunASRNano\n")
    torch.save({"w": torch.zeros(2)}, root / "model.pt")
    return root


def _run_folder(root: Path, names: list[str], base: Path | None = None) -> Path:
    root.mkdir(parents=True)
    for name in names:
        torch.save({"epoch": 1, "state_dict": {"w": torch.ones(2)}, "optimizer": {}}, root / name)
    conf = {"output_dir": str(root), "train_data_set_list": "train.jsonl", "model": "FunASRNano"}
    if base is not None:
        conf["model_path"] = str(base)
    (root / "config.yaml").write_text(yaml.safe_dump(conf))
    return root


def test_a_run_folder_means_its_epoch_best_and_average_checkpoints(tmp_path):
    base = _model_folder(tmp_path / "Fun-ASR-Nano")
    names = [
        "model.pt",
        "model.pt.ep10",
        "model.pt.ep2",
        "model.pt.ep2.500",
        "model.pt.best",
        "model.pt.avg5",
    ]
    run = _run_folder(tmp_path / "run", [*names, ".model.pt.ep3.tmp-12"])
    got = arguments.choose([str(base), str(run)])
    assert [(m.label, m.weights.name, m.is_base) for m in got.models] == [
        ("Fun-ASR-Nano", "model.pt", True),
        ("model.pt.ep2", "model.pt.ep2", False),
        ("model.pt.ep10", "model.pt.ep10", False),
        ("model.pt.best", "model.pt.best", False),
        ("model.pt.avg5", "model.pt.avg5", False),
    ]
    assert all(m.model_dir == base for m in got.models)
    assert any("1 step checkpoint(s)" in n and "model.pt.ep2.500" in n for n in got.notes)
    assert any("model.pt (the latest" in n for n in got.notes)


def test_a_run_folder_is_not_a_model_folder(tmp_path):
    """A run's folder also holds config.yaml and model.pt: the trainer's config marks it."""
    run = _run_folder(tmp_path / "run", ["model.pt"])
    assert not arguments.is_model_folder(run)
    assert arguments.is_model_folder(_model_folder(tmp_path / "m"))


def test_named_files_and_the_base_the_run_recorded(tmp_path):
    base = _model_folder(tmp_path / "base")
    run = _run_folder(tmp_path / "run", ["model.pt", "model.pt.ep1.30"], base=base)
    got = arguments.choose([str(run / "model.pt.ep1.30"), str(run / "model.pt")])
    assert [m.label for m in got.models] == ["model.pt.ep1.30", "run/model.pt"]
    assert {m.model_dir for m in got.models} == {base}
    assert not any(m.is_base for m in got.models)


def test_a_checkpoint_without_a_base_is_refused(tmp_path):
    run = _run_folder(tmp_path / "run", ["model.pt.ep1"])
    with pytest.raises(ModelLoadError, match="base model folder"):
        arguments.choose([str(run / "model.pt.ep1")])
    with pytest.raises(ModelLoadError, match="no such file"):
        arguments.choose([str(tmp_path / "nope")])
    with pytest.raises(ModelLoadError, match="neither a model folder"):
        arguments.choose([str(_run_folder(tmp_path / "empty", []))])


@pytest.mark.parametrize(
    "saved",
    [
        {"epoch": 1, "state_dict": {"a.w": torch.ones(2)}, "optimizer": {"state": {}}},  # FunASR's
        {"state_dict": {"a.w": torch.ones(2)}},  # FunASR's average
        {"module.a.w": torch.ones(2)},  # a DDP state_dict
        {"a.w": torch.ones(2)},  # a plain state_dict (the released model.pt)
    ],
    ids=["checkpoint", "average", "ddp", "state_dict"],
)
def test_read_weights_keeps_the_model_weights_only(tmp_path, saved):
    path = tmp_path / "model.pt.ep1"
    torch.save(saved, path)
    assert list(checkpoints.read_weights(path)) == ["a.w"]


def test_read_weights_of_a_deepspeed_folder(tmp_path):
    folder = tmp_path / "model.pt.ep1"
    folder.mkdir()
    torch.save({"module": {"a.w": torch.ones(2)}, "epoch": 1}, folder / checkpoints.DEEPSPEED_STATES)
    assert list(checkpoints.read_weights(folder)) == ["a.w"]


def test_read_weights_refuses_what_is_not_a_checkpoint(tmp_path):
    text = tmp_path / "model.pt.best"
    text.write_text("not a checkpoint")
    with pytest.raises(ModelLoadError, match=f"{text}: does not load"):
        checkpoints.read_weights(text)
    empty = tmp_path / "model.pt.avg3"
    torch.save({"epoch": 1}, empty)
    with pytest.raises(ModelLoadError, match="holds no model weights"):
        checkpoints.read_weights(empty)


def test_check_fit_names_missing_extra_and_reshaped_tensors():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3))
    good = {k: v.clone() for k, v in model.state_dict().items()}
    checkpoints.check_fit(model, good, Path("x"))
    with pytest.raises(ModelLoadError, match=r"x: .*1 of the model's tensors missing \(e.g. 0.bias\)"):
        checkpoints.check_fit(model, {"0.weight": good["0.weight"]}, Path("x"))
    with pytest.raises(ModelLoadError, match="1 tensors the model does not have"):
        checkpoints.check_fit(model, {**good, "lora_A": torch.ones(1)}, Path("x"))
    with pytest.raises(ModelLoadError, match=r"0.weight: \(3, 3\) in the checkpoint, \(3, 2\) in the model"):
        checkpoints.check_fit(model, {**good, "0.weight": torch.ones(3, 3)}, Path("x"))
    # CTC tensors may be missing (upstream switches CTC off then); they are not transcripts.
    checkpoints.check_fit(model, {**good, "ctc_decoder.w": torch.ones(1)}, Path("x"))
