"""`ftenv eval`: its parser. `ftenv eval score REF HYP` scores two transcript files
(ftenv.evaluate.score_files); any other first word is the models path, `ftenv eval TEST.jsonl
MODEL...`, which decodes a test set with each model before scoring it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftenv.data import normalize
from ftenv.evaluate import score_files
from ftenv.outcome import UNUSABLE

PROG = "ftenv eval"
#: The first word that selects scoring files; anything else is a test set.
SCORE = "score"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="score transcripts: `ftenv eval score REF HYP` (key<TAB>text files)",
        description="`ftenv eval score REF HYP [--raw | --normalize NAME] [--out DIR]`: the error rate of "
        "two key<TAB>text files (FunASR's recipe format), CJK per character and Latin-script words per "
        "word, after the normalization it prints. See docs/scoring.md.",
        usage=f"{PROG} {SCORE} REF HYP [--raw | --normalize NAME] [--out DIR]",
    )
    p.add_argument("words", nargs=argparse.REMAINDER, metavar="score REF HYP ...", help="what to evaluate")
    p.set_defaults(func=run)


def score_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} {SCORE}",
        description="Scores HYP against REF: (S + D + I) / reference tokens over the set. A reference key "
        "without a hypothesis is scored as deletions and named; a hypothesis key the reference lacks is "
        f"an error (exit {UNUSABLE}). See docs/scoring.md.",
    )
    p.add_argument(
        "reference", type=Path, metavar="REF", help="the reference transcripts: key<TAB>text lines"
    )
    p.add_argument("hypothesis", type=Path, metavar="HYP", help="the hypotheses: key<TAB>text lines")
    rules = p.add_mutually_exclusive_group()
    rules.add_argument("--raw", action="store_true", help="score the text as written: no normalization")
    rules.add_argument(
        "--normalize",
        choices=tuple(normalize.PRESETS),
        default=normalize.SCORING.name,
        metavar="NAME",
        help=f"the normalization ({', '.join(normalize.PRESETS)}; default {normalize.SCORING.name})",
    )
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="write the per-utterance table and summary.md/json"
    )
    return p


def run(args: argparse.Namespace) -> int:
    if args.words and args.words[0] == SCORE:
        return run_score(score_parser().parse_args(args.words[1:]))
    return run_models(args.words)


def run_score(args: argparse.Namespace) -> int:
    rules = normalize.RAW if args.raw else normalize.by_name(args.normalize)
    options = score_files.ScoreOptions(args.reference, args.hypothesis, rules, args.out)
    return score_files.run(options)


def run_models(words: list[str]) -> int:
    """The models path (decode TEST.jsonl with each MODEL, then score) is not part of this build."""
    print(
        f"{PROG}: decoding a test set with models is not available in this version; "
        f"`{PROG} {SCORE} REF HYP` scores two key<TAB>text files (got: {' '.join(words) or 'nothing'})",
        file=sys.stderr,
    )
    return UNUSABLE
