"""`ftenv data prepare`: upstream's ChatML JSONL from what fine-tuners have (Kaldi wav.scp + text, a
TSV/CSV, or a folder of audio), with lengths from the real audio and the model's own tokenizer.
Same input, same bytes; a row that cannot be used is listed, never dropped silently.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import audio, chatml, extract, kaldi, normalize, programs, writes
from ftenv.data.rows import Rejected, Row
from ftenv.data.sources import checked_keys, from_folder, from_table
from ftenv.data.workers import default_jobs, parallel_map
from ftenv.model.folder import load_tokenizer, tokenizer_dir
from ftenv.outcome import UNUSABLE

PROG = "ftenv data prepare"
SHOW_REJECTED = 20
INPUTS = ("wav_scp", "text", "table", "audio_dir")
REJECTED, CHOICES = ".rejected.tsv", ".prepare.json"


def prepare(rows: list[Row], tokenizer, jobs: int, rejected: list[Rejected]) -> list[str]:
    """The JSONL lines of the usable rows, in order; the others go to `rejected`."""
    usable = []
    for row in rows:
        if not row.text.strip():
            rejected.append(Rejected(row.source, row.line, row.key, "empty transcript"))
        else:
            usable.append(row)
    durations = parallel_map(audio.read_duration, [r.audio for r in usable], jobs, "audio headers")
    kept = []
    for row, found in zip(usable, durations, strict=True):
        if found.seconds is None:
            rejected.append(Rejected(row.source, row.line, row.key, f"{row.audio}: {found.problem}"))
        else:
            kept.append((row, found.seconds))
    counts = chatml.text_lengths(tokenizer, [row.text for row, _ in kept])
    return [
        chatml.dumps(
            chatml.record(row.key, row.audio, row.text, chatml.speech_frames(seconds), tokens, row.speaker)
        )
        for (row, seconds), tokens in zip(kept, counts, strict=True)
    ]


def _write(path: Path, lines: list[str]) -> None:
    writes.write_text(path, "".join(f"{line}\n" for line in lines))


@dataclass(frozen=True)
class PrepareOptions:
    """What `ftenv data prepare` was asked for (ftenv.commands.data): one input, a tokenizer source."""

    output: str
    wav_scp: str | None = None
    text: str | None = None
    table: str | None = None
    audio_dir: str | None = None
    model_dir: str | None = None
    tokenizer: str | None = None
    jobs: int | None = None
    audio_out: str | None = None
    run_commands: bool = False
    cwd: str | None = None
    normalization: str | None = None  # a preset of ftenv.data.normalize; None: transcripts as written


def _usage_problem(options: PrepareOptions) -> str | None:
    sources = [bool(options.wav_scp), bool(options.table), bool(options.audio_dir)]
    if sum(sources) != 1 or (options.text and not options.wav_scp):
        return (
            "give one input: --wav-scp FILE|DIR [--text FILE] (Kaldi), --table FILE (.tsv/.csv: "
            "path, transcript) or --audio-dir DIR (a transcript NAME.txt beside each audio file)"
        )
    if not options.model_dir and not options.tokenizer:
        return "give --model-dir DIR (its tokenizer counts text_length) or --tokenizer DIR"
    given = [Path(x) for x in (options.wav_scp, options.text, options.table, options.audio_dir) if x]
    missing = [str(p) for p in given if not p.exists()]
    if missing:
        return f"not found: {', '.join(missing)}"
    if problem := writes.file_problem(options.output):
        return f"-o: {problem}"
    if options.audio_out and Path(options.audio_out).exists() and not Path(options.audio_out).is_dir():
        return f"--audio-out {options.audio_out} is not a folder"
    lists = []
    if options.wav_scp:
        folder = kaldi.KaldiFolder.find(Path(options.wav_scp), Path(options.text) if options.text else None)
        lists = [("the list", p) for p in folder.lists()]
    try:
        writes.refuse_clobber(
            outputs(options),
            [*lists, *((f"--{k.replace('_', '-')}", getattr(options, k)) for k in INPUTS)],
            "choose another -o",
            inside_ok=True,
        )
    except writes.ClobberError as exc:
        return str(exc)
    return None


def outputs(options: PrepareOptions) -> list[tuple[str, Path]]:
    """The files `prepare` writes beside its JSONL (not the audio): the JSONL, its listing of rows
    not used and its record of choices."""
    out = Path(options.output)
    return [("-o", out), ("the listing", _beside(out, REJECTED)), ("the record", _beside(out, CHOICES))]


def _beside(out: Path, suffix: str) -> Path:
    return out.with_name(out.name + suffix)


def _refuse_overwrite(options: PrepareOptions, rows: list[Row], lists: list[Path]) -> None:
    """ClobberError when a file `prepare` would write is one it reads: a list, a transcript, a
    recording (an --audio-out segment named as its recording); checked before anything is written."""
    inputs = [("the input", p) for p in lists]
    named = {str(p) for p in lists}
    inputs += [("the transcript", r.source) for r in rows if r.source not in named]
    inputs += [(f"{r.key}'s recording", r.audio) for r in rows if r.audio]
    written = outputs(options)
    if options.audio_out:
        written.append(("--audio-out", Path(options.audio_out)))
        written += [
            (f"{r.key}'s audio", Path(extract.out_path(Path(options.audio_out), r.key)))
            for r in rows
            if r.needs_writing
        ]
    writes.refuse_clobber(
        written,
        inputs,
        "name outputs apart from what prepare reads (-o FILE, --audio-out DIR)",
        inside_ok=True,
    )


def _kaldi_rows(options: PrepareOptions, cwd: Path, rejected: list, notes: list) -> list[Row] | str:
    """The Kaldi folder's rows with their audio written out where needed, or the refusal."""
    folder = kaldi.KaldiFolder.find(Path(options.wav_scp), Path(options.text) if options.text else None)
    if missing := folder.missing():
        return f"not found: {', '.join(missing)} (a Kaldi data folder has wav.scp and text)"
    print(f"{PROG}: {folder.describe()}", file=sys.stderr)
    rows, commands = kaldi.read(folder, cwd, rejected, notes)
    rows = checked_keys(rows, rejected)
    _refuse_overwrite(options, rows, folder.lists())
    if commands and not options.run_commands:
        first = next(r for r in rows if r.command is not None) if rows else None
        example = f" (e.g. {first.key}: `{first.command} |`)" if first else ""
        return (
            f"{folder.wav_scp} has {commands} command entr{'y' if commands == 1 else 'ies'}{example}: "
            f"they run shell text from the data file, so they are run only with {kaldi.COMMAND_FLAG} "
            "(and --audio-out DIR for their audio); or write the audio out first"
        )
    written = [r for r in rows if r.needs_writing]
    if written and not options.audio_out:
        why = "segments of recordings (segments)" if folder.segments else "the output of commands"
        return (
            f"{len(written)} utterances are {why}: name a folder to write their audio to with --audio-out DIR"
        )
    if lacking := programs.missing(written):
        return programs.refusal(lacking)
    if written:
        print(f"{PROG}: writing {len(written)} utterances' audio under {options.audio_out}", file=sys.stderr)
        jobs = options.jobs or default_jobs()
        rows = extract.write_out(rows, Path(options.audio_out), jobs, rejected)
    return rows


def _write_rejected(out: Path, rejected: list[Rejected]) -> Path:
    listing = _beside(out, REJECTED)
    if not rejected:
        if listing.exists():
            listing.unlink()
        return listing
    rejected.sort(key=lambda r: (r.source, r.line, r.key))
    _write(
        listing,
        ["source\tline\tkey\treason", *(f"{r.source}\t{r.line}\t{r.key}\t{r.reason}" for r in rejected)],
    )
    for r in rejected[:SHOW_REJECTED]:
        print(
            f"{PROG}: not used: {r.source} line {r.line} ({r.key or 'no key'}): {r.reason}", file=sys.stderr
        )
    if len(rejected) > SHOW_REJECTED:
        print(f"{PROG}: ... {len(rejected) - SHOW_REJECTED} more", file=sys.stderr)
    return listing


def _say_readings(notes: list[str]) -> None:
    """Where a relative path's two readings named different files: which was taken (docs/data.md)."""
    for note in notes[:SHOW_REJECTED]:
        print(f"{PROG}: relative path: {note}", file=sys.stderr)
    if len(notes) > SHOW_REJECTED:
        print(
            f"{PROG}: ... {len(notes) - SHOW_REJECTED} more relative paths read the same way", file=sys.stderr
        )


def _record_choices(out: Path, options: PrepareOptions, rules: normalize.Normalization | None) -> Path:
    """OUTPUT.prepare.json: how the JSONL was made, beside it (the transcripts' normalization above all)."""
    path = _beside(out, CHOICES)
    inputs = {k: getattr(options, k) for k in INPUTS if getattr(options, k)}
    body = {
        "normalization": rules.name if rules else "none",
        "normalization_rules": rules.describe() if rules else "none: transcripts as written",
        "inputs": {k: os.path.abspath(v) for k, v in inputs.items()},
        "audio_out": os.path.abspath(options.audio_out) if options.audio_out else None,
        "run_commands": options.run_commands,
    }
    _write(path, [json.dumps(body, ensure_ascii=False, indent=1)])
    return path


def run(options: PrepareOptions) -> int:
    problem = _usage_problem(options)
    try:
        rules = normalize.by_name(options.normalization) if options.normalization else None
    except ValueError as exc:
        problem = problem or f"--normalize: {exc}"
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return UNUSABLE
    try:
        tok_dir = Path(options.tokenizer) if options.tokenizer else tokenizer_dir(Path(options.model_dir))
        tokenizer = load_tokenizer(tok_dir)
    except (OSError, ValueError) as exc:
        print(f"{PROG}: cannot load the tokenizer: {exc}", file=sys.stderr)
        return UNUSABLE
    cwd = Path(options.cwd or os.getcwd())
    rejected: list[Rejected] = []
    notes: list[str] = []
    try:
        if options.wav_scp:
            rows = _kaldi_rows(options, cwd, rejected, notes)
        else:
            if options.table:
                rows = from_table(Path(options.table), cwd, rejected, notes)
            else:
                rows = from_folder(Path(options.audio_dir), rejected)
            rows = checked_keys(rows, rejected)
            _refuse_overwrite(options, rows, [Path(options.table or options.audio_dir)])
    except writes.ClobberError as exc:
        rows = str(exc)
    if isinstance(rows, str):
        print(f"{PROG}: {rows}", file=sys.stderr)
        return UNUSABLE
    _say_readings(notes)
    if rules is not None:
        print(f"{PROG}: transcripts: {rules.describe()}", file=sys.stderr)
        for row in rows:
            row.text = normalize.normalize(row.text, rules)
    lines = prepare(rows, tokenizer, options.jobs or default_jobs(), rejected)
    out = Path(options.output)
    _write(out, lines)
    listing = _write_rejected(out, rejected)
    _record_choices(out, options, rules)
    where = f"; the {len(rejected)} rows not used are listed in {listing}" if rejected else ""
    print(
        f"{PROG}: wrote {len(lines)} utterances to {out}{where}; next: ftenv data check {out}",
        file=sys.stderr,
    )
    return 0 if lines else UNUSABLE
