"""`ftenv finetune --output-dir` the same as --model-dir, inside it or holding it is refused before
anything is made or moved: the trainer would write model.pt over the released weights, and --fresh
(the fix the resume message suggested) moved them to replaced-<time>/, so the trainer died on a
missing init_param. FunASR-free: the refusal comes before the launch."""

from __future__ import annotations

import pytest

from ftenv import cli
from ftenv.outcome import UNUSABLE
from support.checksums import sums
from support.finetune_launch import cmdline


@pytest.mark.parametrize(("out", "how"), [("model", "is"), ("model/run", "lies inside"), (".", "contains")])
@pytest.mark.parametrize("extra", [["--dry-run"], ["--fresh"]])
def test_the_output_dir_is_kept_apart_from_the_model_dir(work, capsys, out, how, extra):
    before = sums(work)
    assert cli.main([*cmdline(work, "--gpus-per-node", "1", *extra), "--output-dir", out]) == UNUSABLE
    err = capsys.readouterr().err
    assert f"--output-dir {work / out if out != '.' else work} {how} --model-dir {work / 'model'}" in err
    assert "give another --output-dir" in err
    assert sums(work) == before and sorted(p.name for p in (work / "model").iterdir()) == [
        "config.yaml",
        "model.pt",
    ]
