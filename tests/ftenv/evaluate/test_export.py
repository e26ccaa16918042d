"""`ftenv export` on the tiny model: the folder it writes loads with FunASR's own `AutoModel` from
anywhere, with the base folder gone, and transcribes as the checkpoint it came from; it holds the
weights alone; the card's sha256 is the file's; bad input is refused with the path, exit 2, nothing
written. The checkpoints are saved as FunASR's trainer saves them (weights under "state_dict",
optimizer and scheduler state beside them), with weights moved away from the base model's."""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib import metadata
from pathlib import Path

import pytest
import torch
import yaml

from ftenv import cli
from ftenv.data import normalize, writes
from ftenv.evaluate import arguments, card, export, summary
from ftenv.evaluate.summary import ModelRow
from ftenv.model.folder import ModelLoadError
from ftenv.outcome import UNUSABLE
from ftenv.selfcheck import tinymodel
from support.checksums import sums


def _base_copy(tiny: Path, dest: Path) -> Path:
    """The tiny model's folder alone (config.yaml, model.pt, the decoder/tokenizer folder), with
    config.yaml naming the decoder relative to the folder, and the tokenizer through an OmegaConf
    interpolation of it, as the released Fun-ASR-Nano's does."""
    p = tinymodel.paths(tiny)
    dest.mkdir(parents=True)
    shutil.copy2(p.model_pt, dest / "model.pt")
    shutil.copytree(p.llm_dir, dest / p.llm_dir.name)
    conf = yaml.safe_load(p.config.read_text(encoding="utf-8"))
    conf["llm_conf"]["init_param_path"] = p.llm_dir.name
    conf["tokenizer_conf"]["init_param_path"] = "${llm_conf.init_param_path}"
    (dest / "config.yaml").write_text(yaml.safe_dump(conf, sort_keys=False), encoding="utf-8")
    return dest


def _trainer_checkpoint(base: Path, path: Path, seed: int) -> dict:
    """A checkpoint as FunASR's trainer writes one: every weight moved, plus optimizer state."""
    weights = torch.load(base / "model.pt", weights_only=True)
    g = torch.Generator().manual_seed(seed)
    by_storage: dict[int, torch.Tensor] = {}  # tied tensors (the LLM's embedding and head) move together
    moved = {}
    for k, v in weights.items():
        if v.is_floating_point() and v.untyped_storage().data_ptr() not in by_storage:
            by_storage[v.untyped_storage().data_ptr()] = v + (0.05 * torch.randn(v.shape, generator=g)).to(
                v.dtype
            )
        moved[k] = by_storage.get(v.untyped_storage().data_ptr(), v)
    param = torch.nn.Parameter(torch.ones(3))
    optim = torch.optim.AdamW([param])
    param.sum().backward()
    optim.step()
    state = {"epoch": 1, "optimizer": optim.state_dict(), "scheduler": {"last_epoch": 7}, "state_dict": moved}
    torch.save({**state, "step": 7, "train_loss_avg": 1.5}, path)
    return moved


@pytest.fixture
def run(tiny, tmp_path) -> dict:
    """A base folder and a run folder beside it, as `ftenv finetune` leaves one: config.yaml naming
    the base (FunASR's trainer writes it), two epochs, the best one, a step checkpoint."""
    base = _base_copy(tiny, tmp_path / "base")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"model": str(base), "output_dir": str(run)}))
    best = _trainer_checkpoint(base, run / "model.pt.ep1", seed=1)
    shutil.copy2(run / "model.pt.ep1", run / "model.pt.best")
    _trainer_checkpoint(base, run / "model.pt.ep2", seed=2)
    _trainer_checkpoint(base, run / "model.pt.ep2.5", seed=3)
    return {
        "base": base,
        "run": run,
        "best": best,
        "wav": sorted(tinymodel.paths(tiny).wav_dir.glob("*.wav"))[0],
    }


def _auto_model(model: Path, **kwargs):
    from funasr import AutoModel

    return AutoModel(model=str(model), device="cpu", disable_update=True, disable_pbar=True, **kwargs)


def _greedy(model, wav: Path) -> str:
    return model.generate(input=[str(wav)], max_length=12)[0]["text"]


def test_exported_folder_loads_alone_and_transcribes_as_its_checkpoint(run, tmp_path, monkeypatch):
    """AutoModel(model=OUT) gets exactly the checkpoint's tensors (FunASR's loader would only warn
    about a missing one), and its greedy transcript of a file is the checkpoint's own, loaded the
    way FunASR loads a checkpoint onto its base folder. Greedy decoding of the same weights is
    deterministic, so equal text plus equal tensors is the faithful check; comparing tensors
    one by one also catches a change that happens not to alter a 12-token transcript."""
    out = tmp_path / "shipped" / "asr-ft"
    assert cli.main(["export", str(run["run"]), str(out)]) == 0
    monkeypatch.chdir(run["base"])  # its config.yaml names the decoder relative to the working folder
    reference = _greedy(_auto_model(run["base"], init_param=str(run["run"] / "model.pt.best")), run["wav"])

    untuned = _greedy(_auto_model(run["base"]), run["wav"])
    assert untuned != reference  # the transcript tells these weights from the base's
    shutil.rmtree(run["base"])  # nothing of the base folder may be needed any more
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # relative names inside OUT must not depend on the working folder
    loaded = _auto_model(out)
    state = loaded.model.state_dict()
    assert state.keys() == run["best"].keys()
    assert all(torch.equal(state[k], run["best"][k]) for k in state)
    assert _greedy(loaded, run["wav"]) == reference


def test_ftenv_transcribe_reads_the_exported_folder_as_the_checkpoint(run, tmp_path, monkeypatch, capsys):
    """`ftenv transcribe OUT AUDIO` (how a user checks the folder) prints what it prints for the
    checkpoint on its base folder, from a working folder that is neither."""
    out = tmp_path / "out"
    assert cli.main(["export", str(run["run"]), str(out)]) == 0
    capsys.readouterr()
    monkeypatch.chdir(run["base"])
    wav = str(run["wav"])
    best = str(run["run"] / "model.pt.best")
    assert cli.main(["transcribe", best, wav, "--base", str(run["base"]), "--max-new-tokens", "12"]) == 0
    reference = capsys.readouterr().out
    shutil.rmtree(run["base"])
    monkeypatch.chdir(tmp_path)
    assert cli.main(["transcribe", str(out), wav, "--max-new-tokens", "12"]) == 0
    assert capsys.readouterr().out == reference != f"{wav}\t\n"


def test_exported_weights_hold_no_trainer_state(run, tmp_path):
    out = tmp_path / "out"
    done = export.export(export.ExportOptions(source=run["run"] / "model.pt.ep2", out=out))
    saved = torch.load(out / "model.pt", weights_only=True)
    assert done.checkpoint.name == "model.pt.ep2"
    assert set(saved) == set(run["best"])  # the model's tensor names, nothing else
    assert all(isinstance(v, torch.Tensor) for v in saved.values())
    assert (out / "model.pt").stat().st_size < (run["run"] / "model.pt.ep2").stat().st_size


def test_card_names_its_sources_and_the_weights_sha256(run, tmp_path):
    (run["run"] / "data-check.json").write_text(
        json.dumps(
            {
                "verdict": "ok",
                "errors": 0,
                "files": [
                    {
                        "kind": "train",
                        "path": "/data/train.jsonl",
                        "lines": 48,
                        "trained": 47,
                        "seconds": 7200,
                    }
                ],
            }
        )
    )
    evaluation = tmp_path / "eval"
    evaluation.mkdir()
    rows = [
        ModelRow("run/model.pt.best", "/x", 0.0325, 5, 0, 0, 100, 10),
        ModelRow("base", "/y", 0.095, 17, 0, 0, 100, 10, base=True),
    ]
    summary.write_summary(evaluation, rows, normalize.RAW)
    out = tmp_path / "out"
    export.export(export.ExportOptions(source=run["run"], out=out, base=run["base"], eval_dir=evaluation))
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"sha256 `{hashlib.sha256((out / 'model.pt').read_bytes()).hexdigest()}`" in card
    assert f"checkpoint: `{run['run'] / 'model.pt.best'}`" in card
    assert f"base model folder: `{run['base']}`" in card
    assert "- train `/data/train.jsonl`: 48 lines, 47 trained, 2.00 h of audio" in card
    assert (
        "| model | error rate | sub | del | ins | ref tokens | utterances |\n|---|---|---|---|---|---|---|\n"
        in card
    )
    assert "| run/model.pt.best | 0.033 | 5 | 0 | 0 | 100 | 10 |" in card
    assert "| base | 0.095 | 17 | 0 | 0 | 100 | 10 |" in card
    assert f"- funasr: {metadata.version('funasr')}" in card  # the stack that wrote it


def test_a_model_that_cannot_be_built_is_checked_against_the_base_weights(run, tmp_path, monkeypatch, capsys):
    """Where FunASR cannot build the model on the meta device, the base folder's own model.pt says
    which tensors the weights must have: still exported, still refused when they do not fit."""

    def unbuildable(conf):
        raise RuntimeError("meta tensors not supported")

    monkeypatch.setattr(export, "_meta_model", unbuildable)
    assert cli.main(["export", str(run["run"]), str(tmp_path / "out")]) == 0
    assert f"checking against {run['base'] / 'model.pt'} instead" in capsys.readouterr().err
    shrunk = {k: v for k, v in run["best"].items() if not k.startswith("audio_adaptor.")}
    torch.save({"state_dict": shrunk}, run["run"] / "model.pt.ep4")
    argv = ["export", str(run["run"] / "model.pt.ep4"), str(tmp_path / "out2")]
    _refused(capsys, argv, tmp_path / "out2", "tensors missing (e.g. audio_adaptor.")


def test_the_base_configuration_json_is_kept_and_its_files_copied(run, tmp_path):
    """A ModelScope folder's configuration.json: its metadata kept, the files its file_path_metas
    names copied, and the decoder and weights named beside them."""
    (run["base"] / "LICENSE").write_text("the model's licence\n")
    base_metas = {"init_param": "model.pt", "config": "config.yaml", "license": "LICENSE"}
    (run["base"] / "configuration.json").write_text(
        json.dumps({"framework": "pytorch", "file_path_metas": base_metas})
    )
    out = tmp_path / "out"
    export.export(export.ExportOptions(source=run["run"], out=out))
    assert (out / "LICENSE").read_text() == "the model's licence\n"
    written = json.loads((out / "configuration.json").read_text())
    record = written.pop(export.EXPORT_RECORD)  # what --force recognises an earlier export by
    assert record == {
        "weights_sha256": export.sha256_of(out / "model.pt"),
        "entries": sorted(p.name for p in out.iterdir()),
    }
    assert written == {
        "framework": "pytorch",
        "file_path_metas": {
            **base_metas,
            "llm_conf": {"init_param_path": "Qwen3-tiny"},
            "tokenizer_conf": {"init_param_path": "Qwen3-tiny"},
        },
    }


def _refused(capsys, argv: list[str], out: Path, *needles: str) -> None:
    """exit 2, each needle in the message, OUT not written, no temporary folder left beside it."""
    assert cli.main(argv) == UNUSABLE
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err
    assert not out.exists()
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def test_a_checkpoint_that_does_not_load_is_refused(run, tmp_path, capsys):
    broken = run["run"] / "model.pt.ep3"
    broken.write_bytes(b"PK\x03\x04 half a file")
    out = tmp_path / "out"
    _refused(
        capsys, ["export", str(broken), str(out)], out, str(broken), "does not load as a PyTorch checkpoint"
    )


def test_weights_of_another_model_are_refused(run, tmp_path, capsys):
    shrunk = {k: v for k, v in run["best"].items() if not k.startswith("audio_adaptor.")}
    torch.save({"state_dict": shrunk}, run["run"] / "model.pt.ep4")
    out = tmp_path / "out"
    argv = ["export", str(run["run"] / "model.pt.ep4"), str(out)]
    _refused(
        capsys, argv, out, str(run["run"] / "model.pt.ep4"), "tensors missing (e.g. audio_adaptor.", "--base"
    )


def test_a_model_folder_without_its_decoder_files_is_refused(run, tmp_path, capsys):
    (run["base"] / "Qwen3-tiny" / "config.json").unlink()
    out = tmp_path / "out"
    _refused(
        capsys, ["export", str(run["run"]), str(out)], out, str(run["base"] / "Qwen3-tiny"), "config.json"
    )


def test_a_run_without_a_recorded_base_asks_for_one(run, tmp_path, capsys):
    (run["run"] / "config.yaml").unlink()
    out = tmp_path / "out"
    _refused(capsys, ["export", str(run["run"]), str(out)], out, str(run["run"] / "config.yaml"), "--base")


def test_force_replaces_only_an_earlier_export_holding_nothing_else(run, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    assert cli.main(["export", str(run["run"]), str(out)]) == UNUSABLE
    assert "--force" in capsys.readouterr().err
    # --force over a folder `ftenv export` did not write: refused, nothing removed (issue: it was).
    assert cli.main(["export", str(run["run"]), str(out), "--force"]) == UNUSABLE
    assert "not replaced" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    (out / "mine.txt").unlink()
    assert cli.main(["export", str(run["run"]), str(out)]) == 0
    entries = ["Qwen3-tiny", "README.md", "config.yaml", "configuration.json", "model.pt"]
    assert sorted(p.name for p in out.iterdir()) == entries
    assert cli.main(["export", str(run["run"] / "model.pt.ep2"), str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == entries  # an earlier export: replaced
    assert oct(out.stat().st_mode & 0o777) == oct(0o777 & ~writes.umask())
    (out / "notes.txt").write_text("mine")  # an export with something of the user's in it: kept
    before = sums(out)
    assert cli.main(["export", str(run["run"]), str(out), "--force"]) == UNUSABLE
    assert "notes.txt" in capsys.readouterr().err and sums(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@pytest.mark.parametrize("where", ["run", "run/sub", "parent", "base"])
def test_out_over_what_the_export_reads_is_refused(run, tmp_path, capsys, where):
    """OUT the run folder (the issue: --force left it holding only the export), inside it, holding
    it, or the base model folder: refused before any work, both paths named, nothing changed."""
    out = {"run": run["run"], "run/sub": run["run"] / "sub", "parent": tmp_path, "base": run["base"]}[where]
    before = sums(tmp_path)
    assert (
        cli.main(
            ["export", str(run["run"] / "model.pt.ep1"), str(out), "--base", str(run["base"]), "--force"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "nothing was written" in err and str(out) in err
    assert str(run["base"] if where == "base" else run["run"]) in err
    assert sums(tmp_path) == before


# --- which checkpoint a run folder means (file names only) ------------------------------------------


def _files(folder: Path, *names: str) -> Path:
    folder.mkdir()
    for name in names:
        (folder / name).write_bytes(b"")
    return folder


def test_a_run_folder_means_its_best_checkpoint(tmp_path):
    run = _files(
        tmp_path / "run", "model.pt", "model.pt.ep1", "model.pt.ep12", "model.pt.best", "model.pt.ep12.9"
    )
    assert arguments.export_choice(run) == run / "model.pt.best"


def test_without_a_best_the_newest_epoch_and_never_a_step_checkpoint(tmp_path):
    run = _files(tmp_path / "run", "model.pt", "model.pt.ep2", "model.pt.ep10", "model.pt.ep11.500")
    assert arguments.export_choice(run) == run / "model.pt.ep10"
    assert arguments.export_choice(run / "model.pt.ep11.500") == run / "model.pt.ep11.500"


def test_a_stopped_run_with_step_checkpoints_only_names_them(tmp_path):
    run = _files(tmp_path / "run", "model.pt", "model.pt.ep0.300")
    with pytest.raises(ModelLoadError, match=r"model\.pt\.ep0\.300; name one"):
        arguments.export_choice(run)


def test_a_failure_while_writing_leaves_nothing(run, tmp_path, monkeypatch, capsys):
    """A failure after the weights are written (here: the card, on a full disk) is named with OUT,
    exit 2, and leaves neither OUT nor the temporary folder beside it."""

    def fail(facts):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export.card, "render", fail)
    out = tmp_path / "out"
    _refused(
        capsys, ["export", str(run["run"]), str(out)], out, f"{out}: could not be written", "No space left"
    )


# --- the eval table of the card (summary.json as `ftenv eval` writes it) ---------------------------


def test_a_summary_with_its_normalization_is_shown_with_it(tmp_path):
    row = ModelRow("base", "/m", 0.095, 1, 2, 3, 100, 4, base=True)
    summary.write_summary(tmp_path, [row], normalize.RAW)
    table = card.eval_table(summary.read_summary(tmp_path), tmp_path)
    assert table[2] == f"Normalization: {normalize.RAW.describe()}"
    assert table[4:] == [
        "| model | error rate | sub | del | ins | ref tokens | utterances |",
        "|---|---|---|---|---|---|---|",
        "| base | 0.095 | 1 | 2 | 3 | 100 | 4 |",
    ]


@pytest.mark.parametrize(
    "text", ["", "{not json", "[]", '{"models": "base 9.5"}', "[1, 2]", '{"rows": [{"model": "base"}]}']
)
def test_a_summary_without_a_table_is_refused_with_its_path(tmp_path, text):
    (tmp_path / "summary.json").write_text(text)
    with pytest.raises(ModelLoadError, match=f"{tmp_path / 'summary.json'}: .*run `ftenv eval` again"):
        summary.read_summary(tmp_path)
