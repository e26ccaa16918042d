"""The transcript normalization: each rule on mixed Chinese/English text, each preset's flags, and the
report line that names what was and was not done."""

from __future__ import annotations

import pytest

from ftenv.data.normalize import PREPARE, RAW, SCORING, Normalization, by_name, normalize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Kaldi-style spaces between Chinese characters go; the space before a Latin word stays.
        ("今 天 天 气 很 好 OK", "今天天气很好 ok"),
        # Full-width letters, digits and the ideographic space folded; CJK punctuation removed.
        ("ＡＩ\u3000模型，版本２。", "ai 模型版本2"),
        # ASCII punctuation: a mark becomes a space, apostrophes join, marks between digits stay.
        ("Hello, world! don't well-known 3.5 1,000", "hello world dont well known 3.5 1,000"),
        # Kana are CJK: their spaces go too; symbols stay.
        ("こ ん に ち は 50%", "こんにちは 50%"),
        # Digits are kept as written, and Traditional characters are not converted.
        ("2024 年 這個", "2024 年這個"),
        ("  ", ""),
    ],
)
def test_scoring_rules(text, expected):
    assert normalize(text, SCORING) == expected


def test_raw_changes_nothing():
    text = "今 天，ＡＩ Don't  "
    assert normalize(text, RAW) == text


def test_prepare_keeps_punctuation_and_case():
    assert normalize("今 天，ＡＩ Don't!", PREPARE) == "今天,AI Don't!"


def test_each_flag_alone():
    text = "Ａ 今 天，B"
    assert normalize(text, Normalization("w", fold_width=True)) == "A 今 天,B"
    assert normalize(text, Normalization("j", join_cjk=True)) == "Ａ 今天，B"
    assert normalize(text, Normalization("p", remove_punctuation=True)) == "Ａ 今 天 B"
    assert normalize(text, Normalization("l", lowercase=True)) == "ａ 今 天，b"


def test_by_name_and_describe():
    assert by_name("scoring") is SCORING and by_name("raw") is RAW and by_name("prepare") is PREPARE
    with pytest.raises(ValueError, match="known: scoring, raw, prepare"):
        by_name("whisper")
    line = SCORING.describe()
    assert line.startswith("normalization scoring: full-width forms folded (NFKC)")
    parts = ("spaces between CJK", "punctuation removed", "lowercased", "digits as written", "not converted")
    for part in parts:
        assert part in line
    assert RAW.describe() == "normalization raw: none, text compared as written"
    assert "punctuation" not in PREPARE.describe()
