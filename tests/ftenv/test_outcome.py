"""ftenv.outcome is the one table of exit codes: the docs' generated table is its, and the codes the
command pages name are in it (each shown failing on a planted fault)."""

from __future__ import annotations

import re
from dataclasses import replace

from ftenv import outcome
from imagetools.release import generated
from support import ROOT

DOC = ROOT / "docs/variables.md"


def block(text: str) -> str:
    m = re.search(r"<!-- generated: exit-codes -->\n(.*?)<!-- /generated -->", text, re.S)
    assert m, "docs/variables.md has no generated exit-codes block"
    return m[1]


def test_the_codes_are_the_agreed_ones_once_each():
    codes = [c.code for c in outcome.EXIT_CODES]
    assert codes == [0, 1, 2, 3, 4, 6, 75, 126, 127] == sorted(set(codes))
    assert outcome.EXIT == {outcome.PASS: 0, outcome.FAIL: 1, outcome.INCONCLUSIVE: 3}
    named = {c.name: c.code for c in outcome.EXIT_CODES}
    assert named == {
        "PASS": 0,
        "FAIL": 1,
        "UNUSABLE": outcome.UNUSABLE,
        "INCONCLUSIVE": 3,
        "INTERNAL_ERROR": outcome.INTERNAL_ERROR,
        "HUNG": outcome.HUNG,
        "STOPPED": outcome.STOPPED,
        "NOT_RUNNABLE": outcome.NOT_RUNNABLE,
        "NOT_FOUND": outcome.NOT_FOUND,
    }


def test_the_docs_table_is_outcomes():
    text = DOC.read_text()
    assert block(text) == outcome.markdown_table()
    assert generated.regenerate(None, text) == text


def test_a_stale_docs_table_is_found(monkeypatch):
    text = DOC.read_text()
    changed = (replace(outcome.EXIT_CODES[0], meaning="a planted meaning"), *outcome.EXIT_CODES[1:])
    monkeypatch.setattr(outcome, "EXIT_CODES", changed)
    assert block(text) != outcome.markdown_table()
    assert "a planted meaning" in block(generated.regenerate(None, text))


def documented_codes(text: str) -> set[int]:
    """The codes in the first column of every table whose first header is `code` (finetune.md's),
    and of an `Exit codes:` line (selfcheck.md's)."""
    rows = set()
    for table in re.findall(r"^\| code \|.*?(?=\n\n|\n[^|]|\Z)", text, re.M | re.S):
        rows |= {int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)}
    line = re.search(r"^Exit codes: (.*?)(?:\n\n|$)", text, re.M | re.S)
    return rows | ({int(c) for c in re.findall(r"`(\d+)`", line[1])} if line else set())


def test_the_docs_name_only_codes_of_the_table():
    """Every doc and the README: a code table or an `Exit codes:` line names only codes ftenv chooses."""
    known = {c.code for c in outcome.EXIT_CODES}
    for page in ("finetune.md", "selfcheck.md"):
        assert documented_codes((ROOT / "docs" / page).read_text()), page
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        codes = documented_codes(path.read_text())
        assert codes <= known, (path.name, codes - known)
    assert documented_codes("| code | meaning |\n|---|---|\n| 5 | planted |\n") - known == {5}
    assert documented_codes("| year |\n| 2026 | not a code table |\n") == set()
    assert documented_codes("Exit codes: `0` PASS, `7` planted.\n") - known == {7}
