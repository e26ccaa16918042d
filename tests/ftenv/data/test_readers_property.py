"""Every reader of the user's data, fed generated content (hypothesis): JSONL for `data check`,
`data split`, `finetune`'s input check and `eval`'s test set; Kaldi lists (wav.scp, text, segments,
utt2spk) and TSV/CSV tables for `data prepare`; key/text files for `eval score`. Numbers of any size,
NaN and infinities, deep nesting, odd Unicode, control characters, empty files. Whatever comes, the
command exits 0 or 2 (never 4, an internal error) and no input file changes.

Kept to a few seconds: few examples per reader, derandomized (the same examples every run), the
known hard values drawn often, and the tokenizer loaded once."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ftenv import cli
from ftenv.data import prepare
from ftenv.evaluate import models
from ftenv.launch import inputs
from support.checksums import sums
from support.training_data import line, wav

FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: Numbers as JSON (or Python's json) writes them, the ones that broke readers first.
NUMBERS = st.one_of(
    st.sampled_from(
        ["Infinity", "-Infinity", "NaN", "1e999", "-1e999", "9" * 5000, "0", "-1", "1e308", "145.7"]
    ),
    st.integers().map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda x: json.dumps(x)),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    return code, err.getvalue()


_LOAD = prepare.load_tokenizer


@functools.cache
def _tokenizer(tiny: Path):
    return _LOAD(prepare.tokenizer_dir(tiny))


@pytest.fixture
def cached_tokenizer(tiny, monkeypatch):
    """`prepare` loads the tiny model's tokenizer once for all examples, not once each."""
    monkeypatch.setattr(prepare, "load_tokenizer", lambda path: _tokenizer(tiny))


@st.composite
def jsonl_lines(draw, audio: str) -> str:
    """A ChatML line with odd lengths, any JSON value, nesting of any depth, or any text."""
    good = line(audio)
    kind = draw(st.sampled_from(["lengths", "json", "deep", "text", "good"]))
    if kind == "lengths":
        speech, text = draw(NUMBERS), draw(NUMBERS)
        return good.replace('"speech_length": 100', f'"speech_length": {speech}').replace(
            '"text_length": 2', f'"text_length": [{text}]'
        )
    if kind == "json":
        return json.dumps(draw(JSON), ensure_ascii=draw(st.booleans()))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 1000, 200_000]))
        opener = draw(st.sampled_from(["[", '{"a":']))
        return opener * depth + "1" + ("]" if opener == "[" else "}") * depth
    return draw(TEXT) if kind == "text" else good


def _jsonl(draw_lines: list[str], folder: Path, crlf: bool) -> Path:
    path = folder / "data.jsonl"
    path.write_bytes(("\r\n" if crlf else "\n").join(draw_lines).encode("utf-8"))
    return path


@given(data=st.data())
@FAST
def test_jsonl_readers_exit_0_or_2_and_change_nothing(tmp_path, data):
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    folder = root / "in"
    audio = str(wav(folder / "a.wav", 0.3))
    lines = data.draw(st.lists(jsonl_lines(audio), max_size=4))
    manifest = _jsonl(lines, folder, data.draw(st.booleans()))
    before = sums(folder)
    for argv in (
        ["data", "check", "--jobs", "1", "--output-dir", str(root / "check"), str(manifest)],
        ["data", "split", str(manifest), "-o", str(root / "sets"), f"--valid={data.draw(NUMBERS)}"],
        ["data", "split", str(manifest), "-o", str(root / "sets"), f"--valid={data.draw(NUMBERS)}%"],
    ):
        code, err = _run(argv)
        assert code in (0, 2), f"{argv[:2]}: exit {code}: {err[-600:]}"
    assert isinstance(inputs.check_jsonl(manifest, "train", folder), list)
    with contextlib.suppress(models.TestSetError):
        models.read_test_set(manifest)
    assert sums(folder) == before


KEYS = st.one_of(st.sampled_from(["utt1", "a/b", "a__b", "rec", "x y", "", "\ufeffutt1"]), TEXT)
SEPARATORS = st.sampled_from([" ", "\t", " \t ", "\u3000"])


@st.composite
def kaldi_folder(draw, folder: Path, recording: str) -> Path:
    data = folder / "data"
    data.mkdir()
    values = st.sampled_from([recording, "missing.wav", f"cat {recording} |", "x.ark:12", "|"]) | TEXT

    def lines(fields) -> str:
        rows = draw(st.lists(st.tuples(KEYS, SEPARATORS, fields), max_size=4))
        end = draw(st.sampled_from(["\n", "\r\n"]))
        return "".join(f"{k}{sep}{v}{end}" for k, sep, v in rows)

    # One utterance whose lists agree (so that its segment is cut), then anything.
    (data / "wav.scp").write_text(f"rec {recording}\n" + lines(values), encoding="utf-8")
    (data / "text").write_text(f"utt1 {draw(TEXT)}\n" + lines(TEXT), encoding="utf-8")
    if draw(st.booleans()):
        span = st.tuples(KEYS, NUMBERS, NUMBERS).map(lambda t: " ".join(t))
        cut = f"utt1 rec {draw(NUMBERS)} {draw(NUMBERS)}\n"
        (data / "segments").write_text(cut + lines(span), encoding="utf-8")
    if draw(st.booleans()):
        (data / "utt2spk").write_text(lines(KEYS), encoding="utf-8")
    return data


@given(data=st.data())
@FAST
def test_kaldi_lists_exit_0_or_2_and_change_nothing(tiny, tmp_path, cached_tokenizer, data):
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    recording = str(wav(root / "in" / "rec.wav", 0.5))
    folder = data.draw(kaldi_folder(root / "in", recording))
    before = sums(root / "in")
    argv = ["data", "prepare", "--wav-scp", str(folder), "--model-dir", str(tiny), "--jobs", "1"]
    argv += ["--audio-out", str(root / "cut"), "-o", str(root / "out" / "train.jsonl"), "--run-commands"]
    code, err = _run(argv)
    assert code in (0, 2), f"exit {code}: {err[-600:]}"
    assert sums(root / "in") == before


@given(data=st.data())
@FAST
def test_tables_exit_0_or_2_and_change_nothing(tiny, tmp_path, cached_tokenizer, data):
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    audio = str(wav(root / "in" / "a.wav", 0.3))
    suffix = data.draw(st.sampled_from([".csv", ".tsv"]))
    cell = st.sampled_from([audio, "missing.wav", '"', '"a,b"', "path"]) | TEXT
    rows = data.draw(st.lists(st.lists(cell, max_size=4), max_size=4))
    table = root / "in" / f"list{suffix}"
    table.write_text(
        "\n".join((data.draw(st.sampled_from([",", "\t"]))).join(r) for r in rows), encoding="utf-8"
    )
    before = sums(root / "in")
    argv = ["data", "prepare", "--table", str(table), "--model-dir", str(tiny), "--jobs", "1"]
    code, err = _run([*argv, "-o", str(root / "out" / "train.jsonl")])
    assert code in (0, 2), f"exit {code}: {err[-600:]}"
    assert sums(root / "in") == before


@given(ref=st.lists(st.tuples(KEYS, TEXT), max_size=4), hyp=st.lists(st.tuples(KEYS, TEXT), max_size=4))
@FAST
def test_transcript_files_exit_0_or_2_and_change_nothing(tmp_path, ref, hyp):
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    files = []
    for name, rows in (("ref.txt", ref), ("hyp.txt", hyp)):
        (root / name).write_text("".join(f"{k}\t{t}\n" for k, t in rows), encoding="utf-8")
        files.append(str(root / name))
    before = sums(root)
    code, err = _run(["eval", "score", *files])
    assert code in (0, 2), f"exit {code}: {err[-600:]}"
    assert sums(root) == before
