"""The slow-marker rule (docs/testing.md, "Time"): every test that took SLOW_S or more in the
recorded full run (tests/durations.txt) is marked `slow` or is a container test, so `make unit`
(`-m "not container and not slow"`) stays quick; `make test` runs them all. Tests are matched by
file name and test name, so a test file moved to another folder keeps its record."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from support import ROOT

RECORD = ROOT / "tests" / "durations.txt"
SLOW_S = 10.0
CONTAINER = "tests/container/"
#: A line of pytest's --durations block: seconds, phase, node id.
LINE = re.compile(r"^(?P<s>\d+(?:\.\d+)?)s\s+(?:call|setup|teardown)\s+(?P<id>\S+)$")


def recorded_slow(text: str) -> set[str]:
    """The node ids that took SLOW_S or more in one phase."""
    found = (LINE.match(line.strip()) for line in text.splitlines() if not line.startswith("#"))
    return {m["id"] for m in found if m and float(m["s"]) >= SLOW_S}


def _key(node_id: str) -> str:
    path, _, rest = node_id.partition("::")
    return f"{Path(path).name}::{rest}"


def unmarked(slow: set[str], marks: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """(slow tests that carry neither `slow` nor `container`, recorded tests no longer collected)."""
    by_key = {_key(node): names for node, names in marks.items()}
    # A container test needs no marker (tests/container/conftest.py marks the folder's tests), so a
    # renamed one needs no new record either.
    missing = sorted(node for node in slow if _key(node) not in by_key and not node.startswith(CONTAINER))
    bare = sorted(
        node for node in slow if _key(node) in by_key and not {"slow", "container"} & set(by_key[_key(node)])
    )
    return bare, missing


class _Markers:
    """A plugin that keeps each collected test's markers, after every hook that adds markers ran."""

    def __init__(self) -> None:
        self.marks: dict[str, list[str]] = {}

    def pytest_collection_finish(self, session) -> None:
        self.marks = {item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in session.items}


def test_every_recorded_slow_test_is_marked():
    slow = recorded_slow(RECORD.read_text())
    assert slow, f"{RECORD.name} records no test over {SLOW_S:g} s"
    names = {Path(node.partition("::")[0]).name for node in slow}
    files = sorted({path for name in names for path in ROOT.glob(f"tests/**/{name}")})
    # Collected in this process: a full run has imported these modules already, so it takes a second.
    markers = _Markers()
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", "--capture=no", "--rootdir", str(ROOT)]
    with contextlib.redirect_stdout(io.StringIO()) as said:
        code = pytest.main([*args, *map(str, files)], plugins=[markers])
    assert code == pytest.ExitCode.OK, said.getvalue()[-3000:]
    bare, missing = unmarked(slow, markers.marks)
    assert not bare, f"over {SLOW_S:g} s in {RECORD.name} and not marked `slow`: {bare}"
    assert not missing, f"{RECORD.name} names tests that are gone (record a newer run): {missing}"


def test_the_rule_reads_the_record_and_sees_a_missing_marker():
    text = "# a note\n12.50s call  tests/a/test_x.py::test_slow\n9.99s call  tests/a/test_x.py::test_quick\n"
    assert recorded_slow(text) == {"tests/a/test_x.py::test_slow"}
    moved = {"tests/b/test_x.py::test_slow": ["parametrize"]}
    assert unmarked({"tests/a/test_x.py::test_slow"}, moved) == (["tests/a/test_x.py::test_slow"], [])
    assert unmarked({"tests/a/test_x.py::test_slow"}, {"tests/b/test_x.py::test_slow": ["slow"]}) == ([], [])
    assert unmarked({"tests/a/test_x.py::test_gone"}, moved) == ([], ["tests/a/test_x.py::test_gone"])
    assert unmarked({"tests/container/test_x.py::test_gone"}, moved) == ([], [])
