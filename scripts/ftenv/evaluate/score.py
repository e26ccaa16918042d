"""The error rate of mixed Chinese/English transcripts as the field reports it: CJK characters and
Latin-script words are the tokens, the edit alignment is kaldialign's (Kaldi's own algorithm, a
maintained wheel), and the rate is micro-averaged: (S + D + I) / reference tokens over the whole
set, so that long utterances weigh what they contain. docs/scoring.md says why each choice."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import kaldialign

from ftenv.data.normalize import CJK_CHARACTERS, Normalization, normalize
from ftenv.data.writes import written_whole

#: kaldialign's gap symbol in an alignment: no token is empty, so it can never be a real token.
GAP = ""
#: The per-utterance table of one model: `<label>` + this, in the eval's output folder.
TABLE_SUFFIX = ".utterances.tsv"
TABLE_COLUMNS = ("key", "reference", "hypothesis", "tokens", "sub", "del", "ins", "note", "aligned")
NO_HYPOTHESIS = "no hypothesis: scored as deletions"
EMPTY_REFERENCE = "empty reference"
#: Keys named in a message before "and N more".
NAMED_KEYS = 5

_TOKEN = re.compile(f"[{CJK_CHARACTERS}]|[^\\s{CJK_CHARACTERS}]+")


def tokens(text: str) -> list[str]:
    """Each CJK character a token, each whitespace-separated run of anything else one token
    (`今天OK吗 it's` -> 今, 天, OK, 吗, it's)."""
    return _TOKEN.findall(text)


def named(keys: Iterable[str]) -> str:
    """The first few keys and how many more: a message names what it is about without a flood."""
    keys = list(keys)
    shown = ", ".join(keys[:NAMED_KEYS])
    return shown if len(keys) <= NAMED_KEYS else f"{shown} and {len(keys) - NAMED_KEYS} more"


@dataclass(frozen=True)
class UtteranceScore:
    """One utterance: the texts as scored (normalized) and its errors by kind."""

    key: str
    reference: str
    hypothesis: str
    tokens: int
    substitutions: int
    deletions: int
    insertions: int
    alignment: tuple[tuple[str, str], ...]
    missing: bool = False  # no hypothesis in the file: the whole reference counts as deleted

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def note(self) -> str:
        notes = [NO_HYPOTHESIS] if self.missing else []
        return "; ".join(notes + ([EMPTY_REFERENCE] if not self.tokens else []))

    def aligned(self) -> str:
        """The alignment in one line: matches as they are, errors as [reference -> hypothesis], * a gap."""
        return " ".join(
            ref if ref == hyp else f"[{ref or '*'} -> {hyp or '*'}]" for ref, hyp in self.alignment
        )


def score_utterance(key: str, reference: str, hypothesis: str | None, rules: Normalization) -> UtteranceScore:
    """Both texts normalized by the same rules, tokenized, aligned; None: no hypothesis at all."""
    ref, hyp = normalize(reference, rules), normalize(hypothesis or "", rules)
    ref_tokens = tokens(ref)
    pairs = tuple(kaldialign.align(ref_tokens, tokens(hyp), GAP))
    return UtteranceScore(
        key=key,
        reference=ref,
        hypothesis=hyp,
        tokens=len(ref_tokens),
        substitutions=sum(1 for r, h in pairs if r != h and GAP not in (r, h)),
        deletions=sum(1 for _, h in pairs if h == GAP),
        insertions=sum(1 for r, _ in pairs if r == GAP),
        alignment=pairs,
        missing=hypothesis is None,
    )


@dataclass(frozen=True)
class SetScore:
    """A test set scored: every reference key has a row (in the reference's order); the keys that
    do not match are named here, never dropped silently."""

    rules: Normalization
    utterances: tuple[UtteranceScore, ...]
    missing: tuple[str, ...]  # reference keys without a hypothesis: scored as deletions
    extra: tuple[str, ...]  # hypothesis keys without a reference: not scored (nothing to score against)

    @property
    def substitutions(self) -> int:
        return sum(u.substitutions for u in self.utterances)

    @property
    def deletions(self) -> int:
        return sum(u.deletions for u in self.utterances)

    @property
    def insertions(self) -> int:
        return sum(u.insertions for u in self.utterances)

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def tokens(self) -> int:
        return sum(u.tokens for u in self.utterances)

    @property
    def empty_references(self) -> tuple[str, ...]:
        """Keys whose reference has no token after normalization: their insertions still count."""
        return tuple(u.key for u in self.utterances if not u.tokens)

    @property
    def error_rate(self) -> float | None:
        """(S + D + I) / reference tokens over the set; None when there is no reference token."""
        return self.errors / self.tokens if self.tokens else None


def score_sets(
    references: Mapping[str, str], hypotheses: Mapping[str, str], rules: Normalization
) -> SetScore:
    """Every reference scored against the hypothesis of its key under `rules` (the same for both)."""
    return SetScore(
        rules=rules,
        utterances=tuple(score_utterance(k, ref, hypotheses.get(k), rules) for k, ref in references.items()),
        missing=tuple(k for k in references if k not in hypotheses),
        extra=tuple(k for k in hypotheses if k not in references),
    )


def write_table(path: Path, score: SetScore) -> None:
    """The per-utterance table (TSV with a header row; texts as scored), never half a file."""
    with written_whole(path) as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(TABLE_COLUMNS)
        for u in score.utterances:
            counts = (u.tokens, u.substitutions, u.deletions, u.insertions)
            writer.writerow((u.key, u.reference, u.hypothesis, *counts, u.note, u.aligned()))
