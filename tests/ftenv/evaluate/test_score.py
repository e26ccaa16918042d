"""Scoring: tokens (CJK per character, Latin-script words per word), error counts computed by hand on
mixed Chinese/English pairs with punctuation, full-width forms, Kaldi-style spaces and empty
hypotheses, with the normalization on and off, and keys that do not match named, never dropped."""

from __future__ import annotations

import csv

import pytest

from ftenv.data.normalize import RAW, SCORING
from ftenv.evaluate.score import (
    NO_HYPOTHESIS,
    TABLE_COLUMNS,
    score_sets,
    score_utterance,
    tokens,
    write_table,
)


def test_tokens_split_cjk_per_character_and_latin_per_word():
    assert tokens("今天OK吗 it's 3.5 こんにちは") == ["今", "天", "OK", "吗", "it's", "3.5", *"こんにちは"]
    assert tokens("") == [] and tokens("   ") == []
    # Hangul is written with spaces between words: scored per word, as compute-wer does.
    assert tokens("안녕 하세요") == ["안녕", "하세요"]


# (reference, hypothesis, expected (tokens, sub, del, ins) under SCORING, and under RAW), counted by hand.
PAIRS = [
    # Kaldi spaces and a CJK comma in the reference; one substitution (气/汽), one deletion (很).
    # Raw: "，OK！" is one token (no space inside), substituted by "ok".
    ("今 天 天 气 很 好，OK！", "今天天汽好 ok", (7, 1, 1, 0), (7, 2, 1, 0)),
    # Full-width letters and digit; punctuation, case: all equal once normalized.
    # Raw: ＡＩ/ai and ２。/2 substituted, the lone "，" deleted.
    ("ＡＩ 模型，版本２。", "ai模型版本2", (6, 0, 0, 0), (7, 2, 1, 0)),
    # An English word substituted, one inserted; the apostrophe joins.
    # Raw: case and the attached marks make 4 substitutions.
    ("Hello, world! Don't stop.", "hello word don't stop now", (4, 1, 0, 1), (4, 4, 0, 1)),
    # An empty hypothesis: every reference token deleted.
    ("我们用 PyTorch 训练", "", (6, 0, 6, 0), (6, 0, 6, 0)),
]


@pytest.mark.parametrize(("reference", "hypothesis", "scoring", "raw"), PAIRS)
def test_hand_counted_errors(reference, hypothesis, scoring, raw):
    for rules, expected in ((SCORING, scoring), (RAW, raw)):
        u = score_utterance("k", reference, hypothesis, rules)
        assert (u.tokens, u.substitutions, u.deletions, u.insertions) == expected, rules.name
        assert u.errors == sum(expected[1:])


def test_normalization_is_applied_to_both_sides():
    # The hypothesis alone carries what the rules remove: it must be normalized too.
    u = score_utterance("k", "今天 ai 好", "今 天，ＡＩ 好。", SCORING)
    assert (u.reference, u.hypothesis, u.errors) == ("今天 ai 好", "今天 ai 好", 0)


def test_the_alignment_is_kept_and_written():
    u = score_utterance("k", "今 天 天 气 很 好", "今天天汽好", SCORING)
    assert u.aligned() == "今 天 天 [气 -> 汽] [很 -> *] 好"


def test_set_score_is_micro_averaged_and_names_the_keys_that_do_not_match():
    references = {"a": "今天天气", "b": "hello world", "c": "好", "d": "。"}
    hypotheses = {"a": "今天天汽", "c": "好好", "d": "嗯", "x": "stray"}
    found = score_sets(references, hypotheses, SCORING)
    assert [u.key for u in found.utterances] == ["a", "b", "c", "d"]
    assert found.missing == ("b",) and found.extra == ("x",)
    assert found.empty_references == ("d",)
    # a: 1 sub of 4; b: 2 deletions (no hypothesis); c: 1 insertion of 1; d: 1 insertion of 0.
    assert (found.substitutions, found.deletions, found.insertions, found.tokens) == (1, 2, 2, 7)
    assert found.error_rate == pytest.approx(5 / 7)
    assert next(u for u in found.utterances if u.key == "b").missing


def test_no_reference_token_gives_no_rate_not_a_division_by_zero():
    found = score_sets({"a": "。", "b": "，"}, {"a": "", "b": "嗯"}, SCORING)
    assert found.tokens == 0 and found.insertions == 1 and found.error_rate is None


def test_table(tmp_path):
    found = score_sets({"a": "今天，好", "b": "ok"}, {"a": "今天\t坏"}, SCORING)
    path = tmp_path / "m.utterances.tsv"
    write_table(path, found)
    rows = list(csv.reader(path.open(encoding="utf-8"), delimiter="\t"))
    assert rows[0] == list(TABLE_COLUMNS)
    # The tab inside the hypothesis is a Kaldi space between CJK characters: gone.
    assert rows[1] == ["a", "今天好", "今天坏", "3", "1", "0", "0", "", "今 天 [好 -> 坏]"]
    assert rows[2] == ["b", "ok", "", "1", "0", "1", "0", NO_HYPOTHESIS, "[ok -> *]"]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
