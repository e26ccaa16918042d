"""ftenv.text: the one way numbers, VAR=value settings and Markdown tables are written in ftenv's messages."""

import math
import shlex

import pytest

from ftenv import text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((0.0981,), "0.098"),
        ((1.05, 2, "x"), "1.05x"),
        ((0.1, 3, " s"), "0.100 s"),
        ((None,), "n/a"),
        ((math.nan, 3, " s"), "n/a"),
        ((math.nan, 3, "", "-"), "-"),
        ((3,), "3.000"),
    ],
)
def test_number(args, expected):
    assert text.number(*args) == expected


@pytest.mark.parametrize("value", ["1", "0", "true", "", " 1", "a b", "it's", "$HOME"])
def test_assignment_reads_back_as_the_same_value(value):
    line = text.assignment("VAR", value)
    assert line.startswith("VAR=")
    # What a user pastes into a shell sets exactly the value that was seen.
    assert shlex.split(line) == [f"VAR={value}"]


def test_assignment_quotes_only_where_needed():
    assert text.assignment("VAR", "1") == "VAR=1"
    assert text.assignment("VAR", "") == "VAR=''"
    assert text.assignment("VAR", " 1") == "VAR=' 1'"
    assert text.assignment("VAR", None) == "VAR unset"


def test_markdown_table_aligns_the_numbered_columns_right():
    rows = [("base", 1.5, "`/m`"), ("ep1", None, "")]
    assert text.markdown_table(("model", "rate", "path"), rows, right={1}) == [
        "| model | rate | path |",
        "|---|---:|---|",
        "| base | 1.5 | `/m` |",
        "| ep1 | None |  |",
    ]
    assert text.markdown_table(("a",), []) == ["| a |", "|---|"]
