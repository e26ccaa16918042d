"""`ftenv data prepare`: upstream's ChatML JSONL from what fine-tuners have (Kaldi wav.scp + text, a
TSV/CSV, or a folder of audio), with lengths from the real audio and the model's own tokenizer.
Same input, same bytes; a row that cannot be used is listed, never dropped silently.
"""

from __future__ import annotations

import concurrent.futures
import csv
import multiprocessing
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ftenv.data import audio, chatml
from ftenv.data import lines as lines_mod
from ftenv.outcome import UNUSABLE

PROG = "ftenv data prepare"
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a")
TRANSCRIPT_SUFFIXES = (".txt", ".lab")
PATH_HEADERS = {"path", "audio", "wav", "file", "filename", "audio_path", "audio_filepath"}
SHOW_REJECTED = 20


@dataclass
class Row:
    source: str
    line: int
    key: str
    audio: str
    text: str


@dataclass
class Rejected:
    source: str
    line: int
    key: str
    reason: str


def _read_lines(path: Path, rejected: list[Rejected]):
    """(line number, text) of a UTF-8 file; a line that is not UTF-8 is rejected, not fatal."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                yield number, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                rejected.append(Rejected(str(path), number, "", "not UTF-8: re-encode the file"))


def _absolute(path: str, base: Path) -> str:
    return path if os.path.isabs(path) else os.path.abspath(base / path)


def from_kaldi(wav_scp: Path, text: Path, rejected: list[Rejected]) -> list[Row]:
    """Rows of wav.scp in its order, transcripts joined by key from `text`."""
    texts: dict[str, tuple[int, str]] = {}
    for number, line in _read_lines(text, rejected):
        if not line.strip():
            continue
        key, _, transcript = line.strip().partition(" ")
        if key in texts:
            rejected.append(Rejected(str(text), number, key, f"key repeated (first on line {texts[key][0]})"))
            continue
        texts[key] = (number, transcript.strip())
    rows, keys, listed = [], set(), set()
    for number, line in _read_lines(wav_scp, rejected):
        if not line.strip():
            continue
        key, _, path = line.strip().partition(" ")
        path = path.strip()
        listed.add(key)
        if not path:
            rejected.append(Rejected(str(wav_scp), number, key, "no audio path after the key"))
        elif path.endswith("|"):
            rejected.append(
                Rejected(str(wav_scp), number, key, "a command, not a file: write the audio out first")
            )
        elif key in keys:
            rejected.append(Rejected(str(wav_scp), number, key, "key repeated"))
        elif key not in texts:
            rejected.append(Rejected(str(wav_scp), number, key, f"no transcript for this key in {text}"))
        else:
            keys.add(key)
            rows.append(Row(str(wav_scp), number, key, _absolute(path, wav_scp.parent), texts[key][1]))
    for key, (number, _) in texts.items():
        if key not in listed:
            rejected.append(Rejected(str(text), number, key, f"no audio for this key in {wav_scp}"))
    return rows


def from_table(table: Path, rejected: list[Rejected]) -> list[Row]:
    """Rows of a TSV (.tsv, tab) or CSV (comma): audio path, transcript; a header row is skipped."""
    delimiter = "\t" if table.suffix.lower() in (".tsv", ".tab") else ","
    rows = []
    numbered = list(_read_lines(table, rejected))
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
        rows.append(Row(str(table), number, Path(path).stem, _absolute(path, table.parent), cells[1].strip()))
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
    """The model folder's tokenizer: config.yaml's tokenizer_conf.init_param_path (relative to the
    folder), else the folder itself."""
    import yaml

    conf = yaml.safe_load((model_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    raw = (conf.get("tokenizer_conf") or {}).get("init_param_path")
    if not raw:
        return model_dir
    path = Path(raw)
    return path if path.is_absolute() else model_dir / path


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)


def _durations(paths: list[str], jobs: int) -> list[audio.Probe]:
    from tqdm import tqdm

    bar = tqdm(total=len(paths), desc="audio headers", unit="file", file=sys.stderr, disable=None)
    try:
        if jobs <= 1:
            out = []
            for p in paths:
                out.append(audio.probe(p))
                bar.update()
            return out
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            out = []
            for found in pool.map(audio.probe, paths, chunksize=64):
                out.append(found)
                bar.update()
            return out
    finally:
        bar.close()


def prepare(rows: list[Row], tokenizer, jobs: int, rejected: list[Rejected]) -> list[str]:
    """The JSONL lines of the usable rows, in order; the others go to `rejected`."""
    usable = []
    for row in rows:
        if not row.text.strip():
            rejected.append(Rejected(row.source, row.line, row.key, "empty transcript"))
        else:
            usable.append(row)
    probes = _durations([r.audio for r in usable], jobs)
    kept = []
    for row, found in zip(usable, probes, strict=True):
        if found.seconds is None:
            rejected.append(Rejected(row.source, row.line, row.key, f"{row.audio}: {found.problem}"))
        else:
            kept.append((row, found.seconds))
    ids = tokenizer([row.text for row, _ in kept])["input_ids"] if kept else []
    return [
        chatml.dumps(chatml.record(row.key, row.audio, row.text, chatml.speech_frames(seconds), len(tokens)))
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


def run(options: PrepareOptions) -> int:
    sources = [bool(options.wav_scp or options.text), bool(options.table), bool(options.audio_dir)]
    if sum(sources) != 1 or (sources[0] and not (options.wav_scp and options.text)):
        print(
            f"{PROG}: give one input: --wav-scp FILE --text FILE (Kaldi), --table FILE (.tsv/.csv: "
            "path, transcript) or --audio-dir DIR (a transcript NAME.txt beside each audio file)",
            file=sys.stderr,
        )
        return UNUSABLE
    if not options.model_dir and not options.tokenizer:
        print(
            f"{PROG}: give --model-dir DIR (its tokenizer counts text_length) or --tokenizer DIR",
            file=sys.stderr,
        )
        return UNUSABLE
    given = [Path(x) for x in (options.wav_scp, options.text, options.table, options.audio_dir) if x]
    missing = [str(p) for p in given if not p.exists()]
    if missing:
        print(f"{PROG}: not found: {', '.join(missing)}", file=sys.stderr)
        return UNUSABLE
    try:
        tok_dir = Path(options.tokenizer) if options.tokenizer else tokenizer_dir(Path(options.model_dir))
        tokenizer = load_tokenizer(tok_dir)
    except (OSError, ValueError) as exc:
        print(f"{PROG}: cannot load the tokenizer: {exc}", file=sys.stderr)
        return UNUSABLE
    rejected: list[Rejected] = []
    if options.wav_scp:
        rows = from_kaldi(Path(options.wav_scp), Path(options.text), rejected)
    elif options.table:
        rows = from_table(Path(options.table), rejected)
    else:
        rows = from_folder(Path(options.audio_dir), rejected)
    lines = prepare(rows, tokenizer, options.jobs or lines_mod.default_jobs(), rejected)
    out = Path(options.output)
    _write(out, lines)
    listing = out.with_name(out.name + ".rejected.tsv")
    if rejected:
        rejected.sort(key=lambda r: (r.source, r.line, r.key))
        body = [
            "source\tline\tkey\treason",
            *(f"{r.source}\t{r.line}\t{r.key}\t{r.reason}" for r in rejected),
        ]
        _write(listing, body)
        for r in rejected[:SHOW_REJECTED]:
            print(
                f"{PROG}: not used: {r.source} line {r.line} ({r.key or 'no key'}): {r.reason}",
                file=sys.stderr,
            )
        if len(rejected) > SHOW_REJECTED:
            print(f"{PROG}: ... {len(rejected) - SHOW_REJECTED} more", file=sys.stderr)
    elif listing.exists():
        listing.unlink()
    where = f"; the {len(rejected)} rows not used are listed in {listing}" if rejected else ""
    print(
        f"{PROG}: wrote {len(lines)} utterances to {out}{where}; next: ftenv data check {out}",
        file=sys.stderr,
    )
    return 0 if lines else UNUSABLE
