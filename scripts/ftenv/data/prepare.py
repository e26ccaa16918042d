"""`ftenv data prepare`: upstream's ChatML JSONL from what fine-tuners have (Kaldi wav.scp + text, a
TSV/CSV, or a folder of audio), with lengths from the real audio and the model's own tokenizer.
Same input, same bytes; a row that cannot be used is listed, never dropped silently.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import audio, chatml, extract, kaldi, normalize, paths
from ftenv.data import lines as lines_mod
from ftenv.data.rows import Rejected, Row, read_lines
from ftenv.data.workers import parallel_map
from ftenv.model import folder as model_folder
from ftenv.outcome import UNUSABLE

PROG = "ftenv data prepare"
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a")
TRANSCRIPT_SUFFIXES = (".txt", ".lab")
PATH_HEADERS = {"path", "audio", "wav", "file", "filename", "audio_path", "audio_filepath"}
SHOW_REJECTED = 20


def from_table(table: Path, cwd: Path, rejected: list[Rejected], notes: list[str]) -> list[Row]:
    """Rows of a TSV (.tsv, tab) or CSV (comma): audio path, transcript; a header row is skipped."""
    delimiter = "\t" if table.suffix.lower() in (".tsv", ".tab") else ","
    rows = []
    numbered = list(read_lines(table, rejected))
    reader = csv.reader([line for _, line in numbered], delimiter=delimiter)
    for (number, _), cells in zip(numbered, reader, strict=True):
        if not cells or not any(c.strip() for c in cells):
            continue
        if number == numbered[0][0] and cells[0].strip().lower() in PATH_HEADERS:
            continue
        if len(cells) < 2:
            rejected.append(Rejected(str(table), number, "", "expected two columns: audio path, transcript"))
            continue
        path = cells[0].strip()
        found = paths.resolve(path, cwd, table.parent)
        if found.note:
            notes.append(found.note)
        rows.append(Row(str(table), number, Path(path).stem, found.path, cells[1].strip()))
    return rows


def from_folder(folder: Path, rejected: list[Rejected]) -> list[Row]:
    """Each audio file under folder (sorted), with the transcript of the same name beside it."""
    rows = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file()):
        key = path.relative_to(folder).with_suffix("").as_posix().replace("/", "__")
        transcript = next(
            (path.with_suffix(s) for s in TRANSCRIPT_SUFFIXES if path.with_suffix(s).is_file()), None
        )
        if transcript is None:
            rejected.append(Rejected(str(path), 0, key, f"no transcript beside it ({path.stem}.txt)"))
            continue
        try:
            text = " ".join(transcript.read_text(encoding="utf-8").split())
        except UnicodeDecodeError:
            rejected.append(Rejected(str(transcript), 0, key, "transcript not UTF-8: re-encode it"))
            continue
        rows.append(Row(str(transcript), 1, key, os.path.abspath(path), text))
    return rows


def tokenizer_dir(model_dir: Path) -> Path:
    """The model folder's tokenizer: config.yaml's tokenizer_conf.init_param_path, found by the model
    folder rule (ftenv.model.folder.locate), else the folder itself."""
    conf = model_folder.read_config(model_dir)
    if isinstance(conf, model_folder.Problem):
        raise ValueError(conf.message)
    raw = (conf.get("tokenizer_conf") or {}).get("init_param_path")
    if not raw:
        return model_dir
    return model_folder.locate(str(raw), model_dir, Path.cwd()) or model_dir / str(raw)


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)


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
    ids = tokenizer([row.text for row, _ in kept])["input_ids"] if kept else []
    return [
        chatml.dumps(
            chatml.record(
                row.key, row.audio, row.text, chatml.speech_frames(seconds), len(tokens), row.speaker
            )
        )
        for (row, seconds), tokens in zip(kept, ids, strict=True)
    ]


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    tmp.replace(path)


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
    return f"not found: {', '.join(missing)}" if missing else None


def _kaldi_rows(options: PrepareOptions, cwd: Path, rejected: list, notes: list) -> list[Row] | str:
    """The Kaldi folder's rows with their audio written out where needed, or the refusal."""
    folder = kaldi.KaldiFolder.find(Path(options.wav_scp), Path(options.text) if options.text else None)
    if missing := folder.missing():
        return f"not found: {', '.join(missing)} (a Kaldi data folder has wav.scp and text)"
    print(f"{PROG}: {folder.describe()}", file=sys.stderr)
    rows, commands = kaldi.read(folder, cwd, rejected, notes)
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
    if written:
        print(f"{PROG}: writing {len(written)} utterances' audio under {options.audio_out}", file=sys.stderr)
        jobs = options.jobs or lines_mod.default_jobs()
        rows = extract.write_out(rows, Path(options.audio_out), jobs, rejected)
    return rows


def _write_rejected(out: Path, rejected: list[Rejected]) -> Path:
    listing = out.with_name(out.name + ".rejected.tsv")
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
    path = out.with_name(out.name + ".prepare.json")
    inputs = {
        k: getattr(options, k) for k in ("wav_scp", "text", "table", "audio_dir") if getattr(options, k)
    }
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
    if options.wav_scp:
        rows = _kaldi_rows(options, cwd, rejected, notes)
        if isinstance(rows, str):
            print(f"{PROG}: {rows}", file=sys.stderr)
            return UNUSABLE
    elif options.table:
        rows = from_table(Path(options.table), cwd, rejected, notes)
    else:
        rows = from_folder(Path(options.audio_dir), rejected)
    _say_readings(notes)
    if rules is not None:
        print(f"{PROG}: transcripts: {rules.describe()}", file=sys.stderr)
        for row in rows:
            row.text = normalize.normalize(row.text, rules)
    lines = prepare(rows, tokenizer, options.jobs or lines_mod.default_jobs(), rejected)
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
