"""docs/scoring.md says what the code does: its example files, scored by `ftenv eval score`, give the
numbers its comparison table prints for ftenv (compute-wer's rows were measured with compute-wer
0.2.5, which is not in the image), and its presets table names the presets there are."""

from __future__ import annotations

import re

import pytest

from ftenv import cli
from ftenv.data.normalize import PRESETS
from support import ROOT

DOC = (ROOT / "docs/scoring.md").read_text(encoding="utf-8")


def _block(name: str) -> str:
    """The code block that follows the line "`name`:" in the page."""
    found = re.search(rf"^`{re.escape(name)}`:\n\n```\n(.*?)```", DOC, re.S | re.M)
    assert found, f"no example block for {name}"
    return found.group(1)


def _documented_row(command: str) -> list[str]:
    """rate, N, S, D, I of the comparison table's row for `command`."""
    found = re.search(rf"^\| `{re.escape(command)}` \| (.*) \|$", DOC, re.M)
    assert found, f"no row for {command}"
    return [cell.removesuffix(" %") for cell in found.group(1).split(" | ")]


@pytest.mark.parametrize("options", [[], ["--raw"]])
def test_the_comparison_rows_of_ftenv_are_what_it_prints(tmp_path, capsys, monkeypatch, options):
    for name in ("ref.txt", "hyp.txt"):
        (tmp_path / name).write_text(_block(name), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["eval", "score", "ref.txt", "hyp.txt", *options]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| hyp.txt |"))
    cells = row.strip("| ").split(" | ")
    rate, sub, dels, ins, tokens = cells[1], cells[3], cells[4], cells[5], cells[6]
    command = " ".join(["ftenv eval score ref.txt hyp.txt", *options])
    assert _documented_row(command) == [rate, tokens, sub, dels, ins]


def test_the_presets_table_names_every_preset():
    documented = re.findall(r"^\| `(\w+)`(?: \(default\)| \(`--raw`\))? \|", DOC, re.M)
    assert documented == list(PRESETS)
