"""`ftenv eval TEST.jsonl MODEL...`: the eval sees the fine-tune (a checkpoint overfit on a few
utterances scores far better on them than the base model, in one run over both), and bad input is
refused with the path, exit 2 and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ftenv import cli, outcome
from ftenv.selfcheck import tinymodel
from support.overfit import overfit, train_lines

#: Caps the base model's transcripts (random weights never say <|im_end|>): upstream's 512 would take minutes.
NEW_TOKENS = "24"


@pytest.fixture(scope="module")
def run(tiny, tmp_path_factory):
    """A run's output folder: the tiny model overfit on 3 utterances, saved as model.pt.ep1 (and, as
    FunASR leaves them, model.pt and a step checkpoint), with the test set of those utterances."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("run")
    lines = train_lines(tiny, 3)
    checkpoint = overfit(tiny, lines)
    for name in ("model.pt.ep1", "model.pt", "model.pt.ep1.30"):
        torch.save(checkpoint, folder / name)
    (folder / "test.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    yield folder
    torch.set_num_threads(threads)


def _eval(test: Path, *models: Path, out: Path, extra=()) -> int:
    argv = ["eval", str(test), *map(str, models), "--out", str(out), "--device", "cpu"]
    return cli.main([*argv, "--max-new-tokens", NEW_TOKENS, "--batch-size", "3", *extra])


def test_the_eval_sees_the_fine_tune(tiny, run, tmp_path, capsys):
    out = tmp_path / "eval"
    assert _eval(run / "test.jsonl", tinymodel.paths(tiny).root, run, out=out) == 0
    printed = capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rates = {m["label"]: m["error_rate"] for m in summary["models"]}
    print(f"error rates on the 3 overfit utterances: {rates}")  # recorded in the report (pytest -s)
    base = rates[tinymodel.paths(tiny).root.name]
    tuned = rates["model.pt.ep1"]
    assert set(rates) == {tinymodel.paths(tiny).root.name, "model.pt.ep1"}  # not model.pt nor the step
    assert base > 0.9 and tuned < 0.2, rates
    assert summary["models"][0]["label"] == "model.pt.ep1"  # best first
    assert summary["base"] == tinymodel.paths(tiny).root.name
    assert "1 step checkpoint(s)" in printed.err and "model.pt.ep1.30" in printed.err
    assert "model.pt.ep1" in printed.out and "(base)" in printed.out
    for stem in (tinymodel.paths(tiny).root.name, "model.pt.ep1"):
        hyps = (out / f"{stem}.hyp.txt").read_text(encoding="utf-8").splitlines()
        assert [h.split("\t")[0] for h in hyps] == [json.loads(x)["key"] for x in train_lines(tiny, 3)]
        assert (out / f"{stem}.utterances.tsv").is_file()


def test_a_step_checkpoint_named_is_evaluated(tiny, run, tmp_path, capsys):
    out = tmp_path / "eval"
    assert _eval(run / "test.jsonl", run / "model.pt.ep1.30", out=out, extra=["--base", str(tiny)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [m["label"] for m in summary["models"]] == ["model.pt.ep1.30"]
    assert summary["models"][0]["error_rate"] < 0.2
    # Upstream's path through the command gives the same file.
    extra = ["--base", str(tiny), "--one-by-one"]
    assert _eval(run / "test.jsonl", run / "model.pt.ep1.30", out=tmp_path / "upstream", extra=extra) == 0
    hyps = "model.pt.ep1.30.hyp.txt"
    assert (tmp_path / "upstream" / hyps).read_bytes() == (out / hyps).read_bytes()


def _refused(capsys, out: Path, *needles: str) -> None:
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    assert f"exit {outcome.UNUSABLE}" in err
    assert not out.exists() or not any(out.iterdir())


def test_a_checkpoint_that_does_not_load(tiny, run, tmp_path, capsys):
    cut = tmp_path / "model.pt.ep2"
    cut.write_bytes((run / "model.pt.ep1").read_bytes()[:5000])
    out = tmp_path / "eval"
    assert _eval(run / "test.jsonl", tiny, cut, out=out) == outcome.UNUSABLE
    _refused(capsys, out, str(cut), "does not load")


def test_a_checkpoint_of_another_model(tiny, run, tmp_path, capsys):
    state = torch.load(run / "model.pt.ep1", weights_only=True)["state_dict"]
    del state["llm.lm_head.weight"], state["audio_adaptor.linear1.weight"]
    other = tmp_path / "model.pt.best"
    torch.save({"state_dict": state}, other)
    out = tmp_path / "eval"
    assert _eval(run / "test.jsonl", tiny, other, out=out) == outcome.UNUSABLE
    _refused(capsys, out, str(other), "missing", "audio_adaptor.linear1.weight")


def test_a_model_folder_without_the_decoder_files(tiny, run, tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    conf = (tinymodel.paths(tiny).config).read_text(encoding="utf-8")
    (folder / "config.yaml").write_text(conf.replace(str(tinymodel.paths(tiny).llm_dir), "Qwen3-0.6B"))
    (folder / "model.pt").write_bytes(tinymodel.paths(tiny).model_pt.read_bytes())
    out = tmp_path / "eval"
    assert _eval(run / "test.jsonl", folder, out=out) == outcome.UNUSABLE
    _refused(capsys, out, f"{folder}/Qwen3-0.6B", "(the LLM decoder) is not found")


def test_a_missing_wav(tiny, run, tmp_path, capsys):
    lines = train_lines(tiny, 2)
    gone = tmp_path / "gone.wav"
    lines[1] = lines[1].replace(
        json.loads(lines[1])["messages"][1]["content"].split("!")[1].split("<|")[0], str(gone)
    )
    test = tmp_path / "test.jsonl"
    test.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "eval"
    assert _eval(test, tiny, out=out) == outcome.UNUSABLE
    _refused(capsys, out, str(test), "line 2", str(gone), "not found")


def test_an_empty_test_set(tiny, tmp_path, capsys):
    test = tmp_path / "test.jsonl"
    test.write_text("\n", encoding="utf-8")
    out = tmp_path / "eval"
    assert _eval(test, tiny, out=out) == outcome.UNUSABLE
    _refused(capsys, out, str(test), "no utterance")


def test_transcribe_prints_a_transcript_per_file(tiny, run, capsys):
    """The fine-tuned checkpoint says the overfit transcripts; a missing file is refused."""
    lines = [json.loads(x) for x in train_lines(tiny, 3)]
    wavs = [
        x["messages"][1]["content"].split("<|startofspeech|>!")[1].split("<|endofspeech|>")[0] for x in lines
    ]
    argv = ["transcribe", str(run / "model.pt.ep1"), *wavs, "--base", str(tiny), "--device", "cpu"]
    assert cli.main([*argv, "--max-new-tokens", NEW_TOKENS]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"{w}\t{x['messages'][2]['content']}" for w, x in zip(wavs, lines, strict=True)]
    gone = str(run / "gone.wav")
    assert cli.main(["transcribe", str(tiny), gone, "--device", "cpu"]) == outcome.UNUSABLE
    err = capsys.readouterr().err
    assert gone in err and "not found" in err


def test_export_takes_the_folder_ftenv_eval_wrote(tiny, run, tmp_path, capsys):
    """docs/evaluate.md's steps 4 and 5 chained: `ftenv eval ... --out EVAL`, then `ftenv export RUN OUT
    --eval EVAL` on that folder; the card shows the eval's rows and its normalization."""
    base = tinymodel.paths(tiny).root
    out = tmp_path / "eval"
    assert _eval(run / "test.jsonl", base, run / "model.pt.ep1", out=out) == 0
    exported = tmp_path / "exported"
    argv = ["export", str(run / "model.pt.ep1"), str(exported), "--base", str(base), "--eval", str(out)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    card = (exported / "README.md").read_text(encoding="utf-8")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert f"From `{(out / 'summary.json').resolve()}`" in card
    assert f"Normalization: {summary['normalization']['description']}" in card
    for row in summary["models"]:
        assert f"| {row['label']} | {row['error_rate']:.3f}".rstrip("0").rstrip(".") in card, card


def test_ftenv_eval_help_lists_the_decoding_options(capsys):
    """`ftenv eval --help` (the documented form's help) and `ftenv eval score --help` show every option."""
    decoding = ("--out", "--batch-size", "--device", "--max-new-tokens", "--base", "--one-by-one")
    for argv, options in (
        (["eval", "--help"], decoding),
        (["eval", "score", "--help"], ("--raw", "--normalize", "--out")),
    ):
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        shown = capsys.readouterr().out
        assert done.value.code == 0
        assert all(option in shown for option in options), shown
    with pytest.raises(SystemExit) as done:
        cli.main(["eval", "decode", "--help"])
    assert done.value.code == 0 and "TEST.jsonl MODEL..." in capsys.readouterr().out


@pytest.mark.parametrize("command", [["eval", "test.jsonl", "model"], ["transcribe", "model", "a.wav"]])
@pytest.mark.parametrize("option", ["--batch-size", "--max-new-tokens"])
def test_a_count_below_one_is_refused_alike(command, option, capsys):
    """One rule for both decoders: 0 is refused (exit 2, the option named), never clamped to 1."""
    extra = ["--out", "o"] if command[0] == "eval" else []
    with pytest.raises(SystemExit) as done:
        cli.main([*command, *extra, option, "0"])
    assert done.value.code == outcome.UNUSABLE
    assert f"argument {option}: give 1 or more" in capsys.readouterr().err


def test_a_released_config_with_empty_run_keys_is_a_model_folder_and_a_trainers_is_not(tiny, tmp_path):
    """Fun-ASR-Nano-2512's config.yaml lists `train_data_set_list: null` and `output_dir: null`
    (the released file, docs/benchmarks.md "The released layout on the CPU"): still the base model
    folder, where the config FunASR's trainer saves (both set) marks a run's folder."""
    import yaml

    from ftenv.evaluate import arguments

    p = tinymodel.paths(tiny)
    conf = yaml.safe_load(p.config.read_text(encoding="utf-8"))
    released = {"train_data_set_list": None, "output_dir": None}
    trained = {"train_data_set_list": "/d/train.jsonl", "output_dir": "/out/run1"}
    for name, extra in (("released", released), ("trained", trained)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "model.pt").symlink_to(p.model_pt)
        (folder / "config.yaml").write_text(yaml.safe_dump(conf | extra), encoding="utf-8")
    assert arguments.is_model_folder(tmp_path / "released")
    assert not arguments.is_model_folder(tmp_path / "trained")
    assert arguments.choose([str(tmp_path / "released")]).models[0].is_base
