"""`ftenv eval`: its parsers, two subcommands. `ftenv eval TEST.jsonl MODEL...` (also `ftenv eval
decode TEST.jsonl MODEL...`: the default when the first word names no subcommand) decodes a test set
with each model before scoring it (ftenv.evaluate.models); `ftenv eval score REF HYP` scores two
transcript files (ftenv.evaluate.score_files)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ftenv.commands.options import add_decode_options, from_options
from ftenv.data import normalize
from ftenv.evaluate import models, score_files
from ftenv.outcome import UNUSABLE

#: The subcommands; DECODE is taken when the word after `eval` names none.
DECODE, SCORE = "decode", "score"


def with_default_action(argv: list[str]) -> list[str]:
    """argv with `decode` put after `eval` when the next word is no subcommand, so that the
    documented `ftenv eval TEST.jsonl MODEL...` (and `ftenv eval --help`) reach the decode parser."""
    words = list(argv)
    at = next((i for i, w in enumerate(words) if not w.startswith("-")), None)
    if at is None or words[at] != "eval":
        return words
    if at + 1 >= len(words) or words[at + 1] not in (DECODE, SCORE):
        words.insert(at + 1, DECODE)
    return words


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="decode a test set with models and score them; `ftenv eval score REF HYP` scores files",
        description="`ftenv eval TEST.jsonl MODEL... --out DIR` decodes the test set with each model and "
        "scores it; `ftenv eval score REF HYP` scores two transcript files. See docs/evaluate.md and "
        "docs/scoring.md.",
    )
    actions = p.add_subparsers(dest="action", metavar="{decode,score}", required=True)
    decode_parser(actions)
    score_parser(actions)


def score_parser(actions) -> None:
    p = actions.add_parser(
        SCORE,
        prog=score_files.PROG,
        help="score two key<TAB>text transcript files",
        description="Scores HYP against REF: (S + D + I) / reference tokens over the set. A reference key "
        "without a hypothesis is scored as deletions and named; a hypothesis key the reference lacks is "
        f"an error (exit {UNUSABLE}). See docs/scoring.md.",
    )
    p.add_argument(
        "reference", type=Path, metavar="REF", help="the reference transcripts: key<TAB>text lines"
    )
    p.add_argument("hypothesis", type=Path, metavar="HYP", help="the hypotheses: key<TAB>text lines")
    _rules_options(p)
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="write the per-utterance table and summary.md/json"
    )
    p.set_defaults(func=from_options(score_files.ScoreOptions, score_files.run))


class _Preset(argparse.Action):
    """--normalize NAME stores the preset itself, so that `rules` is what the options take."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, normalize.by_name(values))


def _rules_options(p: argparse.ArgumentParser) -> None:
    """--raw or --normalize NAME, both setting `rules` (the scoring preset when neither is given)."""
    rules = p.add_mutually_exclusive_group()
    rules.add_argument(
        "--raw",
        action="store_const",
        dest="rules",
        const=normalize.RAW,
        default=normalize.SCORING,
        help="score the text as written: no normalization",
    )
    rules.add_argument(
        "--normalize",
        action=_Preset,
        dest="rules",
        choices=tuple(normalize.PRESETS),
        default=normalize.SCORING,
        metavar="NAME",
        help=f"the normalization ({', '.join(normalize.PRESETS)}; default {normalize.SCORING.name})",
    )


def decode_parser(actions) -> None:
    p = actions.add_parser(
        DECODE,
        prog=models.PROG,
        usage=f"{models.PROG} [decode] TEST.jsonl MODEL... --out DIR [options]",
        help="decode TEST.jsonl with each MODEL and score it (the default: `ftenv eval TEST.jsonl MODEL...`)",
        description="Decodes TEST.jsonl (the ChatML JSONL `ftenv data prepare` writes) with each MODEL, "
        "greedy, and scores it against the transcripts in it. MODEL: a model folder as released (the "
        "base), a run's output folder (its model.pt.epN, model.pt.best and model.pt.avgN; not model.pt, "
        "not the step checkpoints model.pt.epE.S unless named) or one checkpoint file. A checkpoint is "
        "built from the base model folder given beside it (or --base, or the one its run recorded). "
        f"Writes per model MODEL{models.HYPOTHESES_SUFFIX} (key<TAB>text) and the per-utterance table, "
        f"and summary.md/json. Bad input exits {UNUSABLE} before decoding, with nothing written. "
        f"`{score_files.PROG} REF HYP` scores two transcript files instead (`{score_files.PROG} --help`).",
    )
    p.add_argument("test_set", type=Path, metavar="TEST.jsonl", help="the test set: ChatML JSONL")
    p.add_argument("models", nargs="+", metavar="MODEL", help="model folders, run folders, checkpoints")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="the folder the results go to")
    add_decode_options(p, "utterances")
    p.add_argument("--base", metavar="DIR", help="the base model folder that checkpoints are built from")
    p.add_argument(
        "--one-by-one", action="store_true", help="upstream's path, one utterance at a time (the reference)"
    )
    _rules_options(p)
    p.set_defaults(func=from_options(models.EvalOptions, models.run))
