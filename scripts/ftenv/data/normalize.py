"""Transcript normalization: one explicit set of rules, applied the same way to references and
hypotheses, and printed in every report (`Normalization.describe()`), so that an error rate can be
reproduced and compared. Why each rule (docs/scoring.md, "Normalization"):

- Full-width forms are folded to half-width with Unicode NFKC (`ＡＢＣ１２` -> `ABC12`, the
  ideographic space -> a space): the same letter typed on a Chinese keyboard is the same word.
- Spaces between two CJK characters (Han ideographs, Japanese kana) are removed: Kaldi-style
  transcripts (AISHELL, WenetSpeech) space every character or word, and those spaces are not words.
  Spaces between Latin-script words and between a CJK character and a Latin word stay.
- Punctuation (Unicode category P: ASCII and CJK marks such as `，。、「」《》`) is removed for
  scoring: speech does not carry it and models place it differently. Apostrophes are dropped inside
  a word (`don't` -> `dont`, one word); every other mark becomes a space, except between two digits
  (`3.5`, `1,000`, `12:30` stay one token). Marks that are read aloud stay: symbols (Unicode
  category S: `$`, `+`, `¥`) and the marks `%`, `&`, `@`.
- Latin-script case is lowered (`str.lower`): case is not spoken.
- Digits are kept as written (`2024` is not turned into `二零二四`): the pinned stack has no
  maintained number normalizer (the recipe's cn_tn / WeTextProcessing need pynini), so a digit
  against a spelled-out number counts as errors.
- Traditional and Simplified Chinese are not converted: the pinned stack has no maintained converter
  (the FunASR recipe's normalizer uses zhconv, which is not in the image); convert both files
  before scoring if a data set mixes them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

#: Characters scored one per token and joined when Kaldi-style spaces separate them: CJK
#: ideographs (unified, extensions A-G, compatibility) and Japanese kana. Hangul is not among them:
#: Korean is written with spaces between words, and is scored per word as compute-wer does.
CJK_CHARACTERS = (
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\U00020000-\U0003134f"  # Extensions B-G and the compatibility supplement
)
_SPACE_BETWEEN_CJK = re.compile(f"(?<=[{CJK_CHARACTERS}])\\s+(?=[{CJK_CHARACTERS}])")
_APOSTROPHES = "'\u2019"
#: Punctuation by Unicode category, but read aloud ("percent", "and", "at"): kept.
_SPOKEN_MARKS = "%&@"


@dataclass(frozen=True)
class Normalization:
    """Which rules apply; each flag off leaves that part of the text as written."""

    name: str
    fold_width: bool = False
    join_cjk: bool = False
    remove_punctuation: bool = False
    lowercase: bool = False

    def describe(self) -> str:
        """One line for a report: what was done and, as important, what was not."""
        done = [
            text
            for flag, text in (
                (self.fold_width, "full-width forms folded (NFKC)"),
                (self.join_cjk, "spaces between CJK characters removed"),
                (self.remove_punctuation, "punctuation removed"),
                (self.lowercase, "Latin script lowercased"),
            )
            if flag
        ]
        if not done:
            return f"normalization {self.name}: none, text compared as written"
        return (
            f"normalization {self.name}: {', '.join(done)}; digits as written; "
            "Traditional/Simplified Chinese not converted"
        )


#: The eval's default: every rule of the module docstring.
SCORING = Normalization("scoring", fold_width=True, join_cjk=True, remove_punctuation=True, lowercase=True)
#: Nothing changed: the text as the model wrote it (`--raw`).
RAW = Normalization("raw")
#: For training transcripts: the same character is one form and Kaldi spaces go, while
#: punctuation and case, which the model learns to write, are kept.
PREPARE = Normalization("prepare", fold_width=True, join_cjk=True)
PRESETS = {rules.name: rules for rules in (SCORING, RAW, PREPARE)}


def by_name(name: str) -> Normalization:
    """The preset called `name` (scoring, raw, prepare); ValueError names the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown normalization {name!r}; known: {', '.join(PRESETS)}") from None


def _without_punctuation(text: str) -> str:
    """Punctuation out: apostrophes joined, marks between digits kept, any other mark a space."""
    out = []
    for i, char in enumerate(text):
        if char in _SPOKEN_MARKS or not unicodedata.category(char).startswith("P"):
            out.append(char)
        elif char in _APOSTROPHES:
            continue
        elif 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit():
            out.append(char)
        else:
            out.append(" ")
    return "".join(out)


def normalize(text: str, rules: Normalization) -> str:
    """`text` under `rules`; with any rule on, runs of whitespace become one space, ends stripped."""
    if not (rules.fold_width or rules.join_cjk or rules.remove_punctuation or rules.lowercase):
        return text
    if rules.fold_width:
        text = unicodedata.normalize("NFKC", text)
    if rules.lowercase:
        text = text.lower()
    if rules.remove_punctuation:
        text = _without_punctuation(text)
    text = " ".join(text.split())
    if rules.join_cjk:
        text = _SPACE_BETWEEN_CJK.sub("", text)
    return text
