"""`ftenv eval score REF HYP`: two `key<TAB>text` files scored, so that decodes made elsewhere (the
FunASR recipe's `decode.py`, another toolkit) get the same number as `ftenv eval`. A hypothesis
missing for a reference key is scored as deletions and named (a decode that lost an utterance must
not score better for it); a hypothesis key that the reference lacks stops the run (exit 2): it means
the files are not of the same test set, and it cannot be scored against nothing."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv.data.normalize import Normalization
from ftenv.evaluate import score, summary
from ftenv.evaluate.transcripts import TranscriptFileError, read_transcripts
from ftenv.outcome import UNUSABLE

PROG = "ftenv eval score"


@dataclass(frozen=True)
class ScoreOptions:
    reference: Path
    hypothesis: Path
    rules: Normalization
    out: Path | None = None


def _refusal(options: ScoreOptions, found: score.SetScore) -> str | None:
    """Why this pair of files cannot give a number, with the fix; None when it can."""
    ref, hyp = options.reference, options.hypothesis
    if len(found.missing) == len(found.utterances):
        return f"no key of {ref} is in {hyp}: are they transcripts of the same test set?"
    if found.extra:
        return (
            f"{len(found.extra)} keys of {hyp} are not in {ref}: {score.named(found.extra)}; the files "
            "are not of the same test set: score against the reference they were decoded from, or "
            "remove those lines"
        )
    if found.error_rate is None:
        return f"every reference of {ref} is empty after normalization ({found.rules.name}): nothing to score"
    return None


def run(options: ScoreOptions) -> int:
    try:
        references = read_transcripts(options.reference)
        hypotheses = read_transcripts(options.hypothesis)
    except TranscriptFileError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return UNUSABLE
    found = score.score_sets(references, hypotheses, options.rules)
    refusal = _refusal(options, found)
    if refusal:
        print(f"{PROG}: {refusal}; exit {UNUSABLE}", file=sys.stderr)
        return UNUSABLE
    label = options.hypothesis.name
    row = summary.ModelRow.from_score(label, str(options.hypothesis), found)
    written: list[Path] = []
    if options.out is not None:
        try:
            options.out.mkdir(parents=True, exist_ok=True)
            table = options.out / f"{label}{score.TABLE_SUFFIX}"
            score.write_table(table, found)
            written = [table, *summary.write_summary(options.out, [row], options.rules)]
        except OSError as exc:
            print(f"{PROG}: cannot write to {options.out}: {exc.strerror or exc}", file=sys.stderr)
            return UNUSABLE
    print(summary.render_markdown([row], options.rules), end="")
    if written:
        print(f"\nwritten: {', '.join(str(path) for path in written)}")
    return 0
