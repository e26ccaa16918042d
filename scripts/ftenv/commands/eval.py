"""`ftenv eval`: its parsers. `ftenv eval score REF HYP` scores two transcript files
(ftenv.evaluate.score_files); any other first word is the models path, `ftenv eval TEST.jsonl
MODEL...`, which decodes a test set with each model before scoring it (ftenv.evaluate.models)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ftenv.commands.options import add_decode_options
from ftenv.data import normalize
from ftenv.evaluate import models, score_files
from ftenv.outcome import UNUSABLE

#: The first word that selects scoring files; anything else is a test set.
SCORE = "score"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="decode a test set with models and score them; `ftenv eval score REF HYP` scores files",
        description="`ftenv eval TEST.jsonl MODEL... --out DIR`: decodes the test set with each model (a "
        "model folder, a run's output folder, a checkpoint) and scores it, summary best first against "
        "the base model. `ftenv eval score REF HYP [--raw | --normalize NAME] [--out DIR]`: the error "
        "rate of two key<TAB>text files (FunASR's recipe format), CJK per character and Latin-script "
        "words per word, after the normalization it prints. See docs/scoring.md; `ftenv eval TEST.jsonl "
        "--help` lists the decoding options.",
        usage=f"{models.PROG} TEST.jsonl MODEL... --out DIR [options] | {score_files.PROG} REF HYP [--raw | "
        "--normalize NAME] [--out DIR]",
    )
    p.add_argument(
        "words",
        nargs=argparse.REMAINDER,
        metavar="TEST.jsonl MODEL... | score REF HYP",
        help="what to evaluate",
    )
    p.set_defaults(func=run)


def score_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=score_files.PROG,
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
    return p


def run(args: argparse.Namespace) -> int:
    if args.words and args.words[0] == SCORE:
        return run_score(score_parser().parse_args(args.words[1:]))
    return run_models(args.words)


def run_score(args: argparse.Namespace) -> int:
    rules = normalize.RAW if args.raw else normalize.by_name(args.normalize)
    options = score_files.ScoreOptions(args.reference, args.hypothesis, rules, args.out)
    return score_files.run(options)


def _rules_options(p: argparse.ArgumentParser) -> None:
    rules = p.add_mutually_exclusive_group()
    rules.add_argument("--raw", action="store_true", help="score the text as written: no normalization")
    rules.add_argument(
        "--normalize",
        choices=tuple(normalize.PRESETS),
        default=normalize.SCORING.name,
        metavar="NAME",
        help=f"the normalization ({', '.join(normalize.PRESETS)}; default {normalize.SCORING.name})",
    )


def models_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=models.PROG,
        description="Decodes TEST.jsonl (the ChatML JSONL `ftenv data prepare` writes) with each MODEL, "
        "greedy, and scores it against the transcripts in it. MODEL: a model folder as released (the "
        "base), a run's output folder (its model.pt.epN, model.pt.best and model.pt.avgN; not model.pt, "
        "not the step checkpoints model.pt.epE.S unless named) or one checkpoint file. A checkpoint is "
        "built from the base model folder given beside it (or --base, or the one its run recorded). "
        f"Writes per model MODEL{models.HYPOTHESES_SUFFIX} (key<TAB>text) and the per-utterance table, "
        f"and summary.md/json. Bad input exits {UNUSABLE} before decoding, with nothing written.",
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
    return p


def run_models(words: list[str]) -> int:
    args = models_parser().parse_args(words)
    rules = normalize.RAW if args.raw else normalize.by_name(args.normalize)
    options = models.EvalOptions(
        test_set=args.test_set,
        models=tuple(args.models),
        out=args.out,
        rules=rules,
        batch_size=args.batch_size,
        device=args.device,
        base=args.base,
        one_by_one=args.one_by_one,
        max_new_tokens=args.max_new_tokens,
    )
    return models.run(options)
