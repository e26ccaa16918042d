"""`ftenv eval TEST.jsonl MODEL... --out DIR`: a test set decoded with each model (the base folder,
a run's checkpoints), each scored against the test set's transcripts, one summary best first.

Everything is checked before the first decode (the test set's lines and audio, every model argument,
every checkpoint's fit on its base model), and every file is written after the last one, each whole:
bad input costs no decode time and leaves no half-written folder.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import audio, chatml, paths, writes
from ftenv.data.normalize import Normalization
from ftenv.data.rows import key_problem
from ftenv.evaluate import arguments, decode, hf_decode, score, summary
from ftenv.evaluate.transcripts import write_transcripts
from ftenv.model import checkpoints
from ftenv.model.folder import ModelLoadError
from ftenv.outcome import UNUSABLE

PROG = "ftenv eval"
#: The per-model hypotheses file: `key<TAB>text`, what `ftenv eval score` and compute-wer read.
HYPOTHESES_SUFFIX = ".hyp.txt"


class TestSetError(ValueError):
    """A test set that cannot be decoded; the message names the path, the lines and the fix."""


@dataclass(frozen=True)
class TestUtterance:
    key: str
    audio: str
    text: str
    seconds: float


@dataclass(frozen=True)
class EvalOptions:
    test_set: Path
    models: tuple[str, ...]
    out: Path
    rules: Normalization
    batch_size: int = decode.BATCH_SIZE
    device: str | None = None
    base: str | None = None
    one_by_one: bool = False
    max_new_tokens: int = decode.MAX_NEW_TOKENS


def read_test_set(path: Path, cwd: Path | None = None) -> list[TestUtterance]:
    """The utterances of a ChatML JSONL (`ftenv data prepare`'s output), read by the data wing's
    parser; every problem named with its line, audio checked to exist and decode (its header)."""
    base = cwd or Path.cwd()
    try:
        raw_lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        raise TestSetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    problems: list[str] = []
    found: list[tuple[int, str, chatml.Utterance]] = []
    keys: dict[str, int] = {}
    for number, raw in enumerate(raw_lines, start=1):
        utt = chatml.read_line(raw)
        if isinstance(utt, chatml.Unreadable):
            if utt.code != chatml.BLANK:  # a blank line: skipped, as FunASR does
                problems.append(f"line {number}: {utt.message}")
            continue
        key = utt.key or Path(utt.audio).stem
        if problem := key_problem(key):
            problems.append(f"line {number}: {problem}")
            continue
        if key in keys:
            problems.append(f"line {number}: key {key!r} repeated (first on line {keys[key]})")
            continue
        keys[key] = number
        found.append((number, key, utt))
    if problems:
        raise TestSetError(f"{path}: {_some(problems)}; fix the lines (`ftenv data check {path}` says more)")
    if not found:
        raise TestSetError(
            f"{path}: no utterance in the test set (an empty file); write it with `ftenv data prepare`"
        )
    out, unusable = [], []
    for number, key, utt in found:
        if misread := paths.trainer_problem(utt.audio, base, path.parent):  # as `ftenv data check` says
            unusable.append(f"line {number}: {misread}")
            continue
        where = paths.trainer_path(utt.audio, base)
        duration = audio.read_duration(where)
        if duration.seconds is None:
            unusable.append(f"line {number}: {where}: {duration.problem}")
            continue
        out.append(TestUtterance(key, where, utt.text, duration.seconds))
    if unusable:
        raise TestSetError(
            f"{path}: {len(unusable)} audio file(s) not usable: {_some(unusable)}; relative paths are read "
            f"from the working directory ({base}); in a container, mount the data at the path the lines name"
        )
    return out


def _some(items: list[str]) -> str:
    more = f"; and {len(items) - score.NAMED_KEYS} more" if len(items) > score.NAMED_KEYS else ""
    return "; ".join(items[: score.NAMED_KEYS]) + more


def file_stem(label: str) -> str:
    return label.replace(os.sep, "__").replace("/", "__").replace("#", "-")


@dataclass
class ModelResult:
    choice: arguments.ModelChoice
    decoded: decode.Decoded
    found: score.SetScore


def _progress_bar(total: int, label: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="utt", file=sys.stderr, disable=None, dynamic_ncols=True)


def _check_out(options: EvalOptions, choices: list[arguments.ModelChoice]) -> None:
    """ClobberError, before any decoding, for an --out that cannot take the files or that is, holds
    or lies inside a model it evaluates (a run folder, a model folder, a checkpoint) or the test set."""
    if problem := writes.folder_problem(options.out):
        raise writes.ClobberError(f"--out: {problem}")
    models = [("the model", m) for m in options.models] + [("the model folder", c.model_dir) for c in choices]
    models += [("the weights", c.weights) for c in choices]
    writes.refuse_clobber([("--out", options.out)], models, "choose another --out")
    writes.refuse_clobber(
        [("--out", options.out)], [("the test set", options.test_set)], "choose another --out", inside_ok=True
    )


def evaluate(options: EvalOptions) -> tuple[list[ModelResult], list[str], list[Path]]:
    """Decode and score every model, then write every file; ModelLoadError or TestSetError before any
    decoding when an input is bad."""
    utterances = read_test_set(options.test_set)
    choices = arguments.choose(list(options.models), options.base)
    _check_out(options, choices.models)
    notes = list(choices.notes)
    built: dict[tuple, decode.Loaded] = {}  # one model per base folder and LoRA settings
    states: list[dict | None] = []
    for choice in choices.models:  # every model builds and every checkpoint fits, before any decode
        key = (choice.model_dir, choice.adapters)
        if choice.hf:  # transformers' layout: loads whole or is refused
            built[key] = hf_decode.load(choice.model_dir, options.device)
            states.append(None)
            continue
        if key not in built:
            built[key] = decode.build(choice.model_dir, options.device, choice.adapters)
        states.append(checkpoints.fitted(built[key].model, choice.weights))  # read once
    wanted = [decode.Utterance(u.key, u.audio) for u in utterances]
    references = {u.key: u.text for u in utterances}
    results = []
    for choice, state in zip(choices.models, states, strict=True):
        loaded = built[choice.model_dir, choice.adapters]
        way = hf_decode if choice.hf else decode
        if way is decode:
            notes += decode.use_weights(loaded, choice.weights, state)
        bar = _progress_bar(len(wanted), choice.label)
        try:
            if options.one_by_one:
                got = way.decode_one_by_one(loaded, wanted, options.max_new_tokens, progress=bar.update)
            else:
                got = way.decode_batched(
                    loaded, wanted, options.batch_size, options.max_new_tokens, progress=bar.update
                )
        finally:
            bar.close()
        results.append(ModelResult(choice, got, score.score_sets(references, got.hypotheses, options.rules)))
    hours = sum(u.seconds for u in utterances) / 3600
    rows = rows_of(results, hours)
    options.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for r in results:
        stem = options.out / file_stem(r.choice.label)
        hyp = stem.with_name(stem.name + HYPOTHESES_SUFFIX)
        table = stem.with_name(stem.name + score.TABLE_SUFFIX)
        write_transcripts(hyp, r.decoded.hypotheses)
        score.write_table(table, r.found)
        written += [hyp, table]
    written += summary.write_summary(options.out, rows, options.rules)
    return results, notes, written


def rows_of(results: list[ModelResult], hours: float) -> list[summary.ModelRow]:
    """One summary row per model; the first model folder given is the base (the reference line)."""
    base = next((r for r in results if r.choice.is_base), None)
    return [
        summary.ModelRow.from_score(
            r.choice.label,
            str(r.choice.weights if not r.choice.is_base else r.choice.model_dir),
            r.found,
            hours=hours,
            decode_seconds=r.decoded.seconds,
            base=r is base,
        )
        for r in results
    ]


def run(options: EvalOptions) -> int:
    """The command's run: the summary printed, every error a message with the path and exit 2."""
    try:
        _, notes, written = evaluate(options)
    except (TestSetError, ModelLoadError, writes.ClobberError) as exc:
        print(f"{PROG}: {exc}; exit {UNUSABLE}", file=sys.stderr)
        return UNUSABLE
    except OSError as exc:
        print(
            f"{PROG}: cannot write to {options.out}: {exc.strerror or exc}; exit {UNUSABLE}", file=sys.stderr
        )
        return UNUSABLE
    for note in notes:
        print(f"{PROG}: {note}", file=sys.stderr)
    print((options.out / summary.SUMMARY_MD).read_text(encoding="utf-8"), end="")  # the table as written
    print(f"\nwritten: {', '.join(str(p) for p in written)}")
    return 0
