"""The summary: best first, the base model's row as the reference line, the normalization above the
table, and the same content in summary.json."""

from __future__ import annotations

import json

import pytest

from ftenv.data.normalize import RAW, SCORING
from ftenv.evaluate.score import score_sets
from ftenv.evaluate.summary import SUMMARY_JSON, SUMMARY_MD, ModelRow, ranked, render_markdown, write_summary

REFERENCES = {"a": "今天天气很好", "b": "hello world"}


def _row(label: str, hypotheses: dict[str, str], **kwargs) -> ModelRow:
    found = score_sets(REFERENCES, hypotheses, SCORING)
    return ModelRow.from_score(label, f"/models/{label}", found, **kwargs)


ROWS = [
    _row("base", {"a": "今天天汽很", "b": "hello"}, base=True, hours=0.5, decode_seconds=90.0),  # 3 of 8
    _row("ep2", {"a": "今天天气很好", "b": "hello word"}),  # 1 of 8
    _row("ep1", {"a": "今天天汽很好", "b": "hello world"}),  # 1 of 8
    _row("avg", {"a": "", "b": ""}),  # 8 of 8
]


def test_rows_from_scores():
    base = ROWS[0]
    assert (base.substitutions, base.deletions, base.insertions, base.reference_tokens) == (1, 2, 0, 8)
    assert base.error_rate == pytest.approx(3 / 8) and base.utterances == 2
    assert base.real_time_factor == pytest.approx(90 / 1800)
    assert ROWS[1].real_time_factor is None


def test_best_first_and_the_base_as_reference_line():
    assert [row.label for row in ranked(ROWS)] == ["ep2", "ep1", "base", "avg"]
    md = render_markdown(ROWS, SCORING)
    assert md.splitlines()[0] == SCORING.describe()
    table = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [line.split(" | ")[0] for line in table] == ["| ep2", "| ep1", "| base (base)", "| avg"]
    # error rate %, then the change against the base in points.
    assert [line.split(" | ")[1:3] for line in table] == [
        ["12.50", "-25.00"],
        ["12.50", "-25.00"],
        ["37.50", "base"],
        ["100.00", "+62.50"],
    ]
    assert "| 0.500 | 90.0 | 0.0500 |" in table[2]


def test_one_base_at_most():
    with pytest.raises(ValueError, match="more than one base row"):
        ranked([*ROWS, _row("base2", {}, base=True)])


def test_written_summary(tmp_path):
    md_path, json_path = write_summary(tmp_path, ROWS, RAW)
    assert (md_path.name, json_path.name) == (SUMMARY_MD, SUMMARY_JSON)
    assert md_path.read_text(encoding="utf-8") == render_markdown(ROWS, RAW)
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert data["normalization"]["name"] == "raw" and data["normalization"]["description"] == RAW.describe()
    assert data["base"] == "base"
    assert [m["label"] for m in data["models"]] == ["ep2", "ep1", "base", "avg"]
    assert data["models"][2]["error_rate"] == pytest.approx(3 / 8)
    assert data["models"][3]["missing_hypotheses"] == [] and data["models"][3]["deletions"] == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == [SUMMARY_JSON, SUMMARY_MD]
