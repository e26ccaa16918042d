"""ftenv.watchdog.funasr_log in process: the slow path field by field, the fast path's edges, and
scan_files (files, gzip, binary, unreadable, ordering) — what `ftenv analyze` reads, checked here
without a subprocess so that a mutation run (docs/testing.md) sees it."""

from __future__ import annotations

import gzip

import pytest

from ftenv.watchdog import funasr_log
from ftenv.watchdog.funasr_log import parse_line
from ftenv.watchdog.step import Step

HEAD = "[2026-11-29 15:18:55,943][root][INFO] - "
BODY = (
    "train, rank: 1, epoch: 0/1, data_slice: 0/1, step_in_slice: 2/6, step_in_epoch: 2, total step: 7, "
    "(loss_avg_rank: 6.160), [('acc', 0.0), ('batch_size', 4), ('batch_size_x_tokens', 400), "
    "('padding_tokens', 4)], {'data_load': '0.010', 'forward_time': '0.020', 'backward_time': '0.030', "
    "'optim_time': '0.040', 'total_time': '0.125'}, GPU, memory: usage: 0.000 GB"
)
LINE = HEAD + BODY
#: The same line off Trainer.log's exact layout (torchrun's prefix, the speed dict reordered).
SLOW = "[default1]:" + LINE.replace("{'data_load': '0.010', ", "{").replace(
    "'total_time': '0.125'}", "'total_time': '0.125', 'data_load': '0.010'}"
)


@pytest.mark.parametrize("line", [LINE, SLOW])
def test_both_paths_read_the_same_step(line):
    assert (funasr_log.fast_fields(line.encode()) is None) is (line == SLOW)
    kind, step = parse_line(line.encode())
    assert kind == "train"
    assert (step.rank, step.index, step.batch, step.padded_len) == (1, 7, 4, 100)
    assert step.seconds == 0.1 and step.new_shape is None
    assert dict(step.phases) == {
        "data_load": 0.01,
        "forward_time": 0.02,
        "backward_time": 0.03,
        "optim_time": 0.04,
    }
    assert parse_line(line.encode(), time="total")[1].seconds == 0.125


def test_fast_fields_returns_plain_values():
    # ..., step_in_epoch, pause (total_time 0.125 minus the phases' 0.100)
    assert funasr_log.fast_fields(LINE.encode()) == (7, 0.1, 4, 100, 1, (0.01, 0.02, 0.03, 0.04), 2, 0.025)
    assert funasr_log.fast_fields(LINE.encode(), time="total")[1] == 0.125
    no_shape = LINE.replace("('batch_size', 4), ", "").encode()
    assert funasr_log.fast_fields(no_shape)[2:4] == (None, None)
    # A shape after the speed dict belongs to nothing: not read.
    late = (
        LINE.replace("('batch_size', 4), ('batch_size_x_tokens', 400), ", "")
        + ", ('batch_size', 4), ('batch_size_x_tokens', 400)"
    )
    assert funasr_log.fast_fields(late.encode())[2:4] == (None, None)
    assert (
        funasr_log.fast_fields(LINE.replace("'total_time': '0.125'", "'total_time': 'n/a'").encode()) is None
    )
    assert funasr_log.fast_fields(b"train, rank: 1, no layout") is None
    # At the very start of the line (no log prefix) the tag is a tag.
    assert funasr_log.fast_fields(BODY.encode())[0] == 7


def test_a_glued_tag_at_the_second_byte_is_still_glued():
    assert parse_line(b"xtrain, rank: 0, {'total_time': '1.0'}") is None
    assert parse_line(b" train, rank: 0, {'total_time': '1.0'}")[0] == "train"


@pytest.mark.parametrize("before", ["x", "_", "7"])
def test_a_tag_glued_to_a_word_is_skipped_for_the_next_one(before):
    glued = (HEAD + before + BODY).encode()
    assert funasr_log.fast_fields(glued) is None and parse_line(glued) is None
    # ...but a real tag later in the line is found.
    later = (HEAD + before + "train, rank: 9, " + SLOW).encode()
    kind, step = parse_line(later)
    assert kind == "train" and step.rank == 1


def test_slow_path_fields():
    line = SLOW.encode()
    no_index = parse_line(line.replace(b"total step: 7, ", b""))[1]
    assert no_index.index == -1
    unreadable_index = parse_line(line.replace(b"total step: 7,", b"total step: seven,"))[1]
    assert unreadable_index.index == -1
    no_tokens = parse_line(line.replace(b"('batch_size_x_tokens', 400), ", b""))[1]
    assert no_tokens.shape is None and no_tokens.batch is None
    zero_batch = parse_line(line.replace(b"('batch_size', 4)", b"('batch_size', 0)"))[1]
    assert zero_batch.shape is None and zero_batch.batch is None
    no_phase = parse_line(line.replace(b"'backward_time': '0.030', ", b""))[1]  # a phase missing: total
    assert no_phase.seconds == 0.125 and [n for n, _ in no_phase.phases] == [
        "data_load",
        "forward_time",
        "optim_time",
    ]
    # A phase that is there but unreadable is a bad line, not a step on the other timer.
    assert parse_line(line.replace(b"'0.030'", b"'n/a'")) == (
        "bad",
        "a time that is not a finite number of 0 or more seconds: backward_time 'n/a'",
    )
    unterminated = parse_line(line.split(b"'total_time': '")[0] + b"'total_time': '0.5")
    assert unterminated == (
        "bad",
        "no total_time and not all of data_load, forward_time, backward_time, optim_time",
    )
    rank_at_end = parse_line(b"[default0]:train, rank: 5")
    assert rank_at_end == (
        "bad",
        "no total_time and not all of data_load, forward_time, backward_time, optim_time",
    )
    assert parse_line(b"[default0]: train, rank:  2 , {'total_time': '1.5'}")[1].rank == 2


def test_validation_lines_and_the_line_limit():
    assert parse_line(b"[x] - val, rank: 0, {'total_time': '0.1'}") == ("val", None)
    assert parse_line(b"[x] - interval, rank: 0") is None
    assert parse_line(b"no step here") is None
    at_limit = SLOW.encode() + b" " * (funasr_log.MAX_LINE - len(SLOW))
    assert len(at_limit) == funasr_log.MAX_LINE and parse_line(at_limit)[0] == "train"


def test_flush_gives_the_unfinished_last_line_once():
    splitter = funasr_log.LineSplitter()
    assert splitter.feed(b"a\nbc") == ([b"a"], 0)
    assert splitter.flush() == b"bc" and splitter.flush() is None
    assert splitter.feed(b"x" * (funasr_log.MAX_LINE + 1)) == ([], 0)
    assert splitter.flush() is None  # an over-long line is not parsed
    assert splitter.feed(b"d\n") == ([b"d"], 0)  # and the splitter starts afresh
    longest = b"x" * funasr_log.MAX_LINE  # an unfinished line of exactly MAX_LINE is kept
    assert splitter.feed(longest) == ([], 0) and splitter.feed(b"\n") == ([longest], -len(longest))


def write(path, lines: list[str]) -> str:
    path.write_bytes(("\n".join(lines)).encode())  # no final newline: the last line is flushed
    return str(path)


def test_scan_files_counts_and_examples(tmp_path):
    # Invalid UTF-8 first: the example is decoded with replacement characters, not an error.
    bad = [b"[default0]:train, rank: 0, \xff no times, " + b"y" * 200]
    bad += [f"[default0]:train, rank: 0, epoch: 0/1, total step: {i}, no times".encode() for i in range(5)]
    lines = [LINE.encode(), b"noise", b"[x] - val, rank: 1, {}", b"[x] - val, rank: 0, {}", *bad]
    lines.append(LINE.replace("total step: 7", "total step: 3").encode())
    path = tmp_path / "t.log"
    path.write_bytes(b"\n".join(lines))  # no final newline: the last line is flushed
    scan = funasr_log.scan_files([str(path)])
    assert scan.lines == 11 and scan.files == [str(path)] and scan.val_lines == 2 and scan.bad_lines == 6
    assert [s.index for s in scan.steps] == [3, 7]  # sorted by step index
    assert len(scan.bad_examples) == 3
    first = scan.bad_examples[0]
    why = "no total_time and not all of data_load, forward_time, backward_time, optim_time"
    assert first.startswith(f"{path}:5: {why}: [default0]:train, rank: 0, \ufffd no times, yyy")
    assert len(first) == len(f"{path}:5: {why}: ") + 160
    assert scan.bad_examples[1].startswith(f"{path}:6: ")
    assert scan.unreadable == [] and scan.binary == []


def test_scan_files_reads_gzip_and_flags_binary_and_unreadable(tmp_path):
    gz = tmp_path / "t.log.gz"
    with gzip.open(gz, "wb") as fh:
        fh.write((LINE + "\n").encode())
    binary = tmp_path / "b.log"
    binary.write_bytes(b"\x00\x01" * 10 + b"\n" + LINE.encode() + b"\n")
    broken = tmp_path / "broken.gz"
    broken.write_bytes(b"\x1f\x8b" + b"not gzip")
    scan = funasr_log.scan_files(
        [str(gz), str(binary), str(tmp_path / "missing.log"), str(tmp_path), str(broken)]
    )
    assert scan.files == [str(gz), str(binary)] and scan.binary == [str(binary)]
    assert scan.lines == 3 and len(scan.steps) == 1  # the same step twice: counted once
    assert scan.unreadable[0] == f"{tmp_path / 'missing.log'}: No such file or directory"
    assert scan.unreadable[1] == f"{tmp_path}: is a directory"
    assert scan.unreadable[2].startswith(f"{broken}: ") and len(scan.unreadable) == 3
    assert "None" not in scan.unreadable[2]  # gzip's error has no strerror: its text is used


def test_binary_is_judged_on_the_start_of_each_chunk(tmp_path):
    for offset, binary in ((8191, True), (8192, False)):
        path = tmp_path / f"nul{offset}.log"
        path.write_bytes(b"a" * offset + b"\x00\n")
        assert (funasr_log.scan_files([str(path)]).binary != []) is binary
    late_nul = tmp_path / "late.log"
    late_nul.write_bytes(LINE.encode() + b"\n" + b"a" * 9000 + b"\x00\n")
    assert funasr_log.scan_files([str(late_nul)]).binary == []


def test_scan_files_time_total(tmp_path):
    flushed = write(tmp_path / "t.log", [LINE])  # no newline: the last line, flushed
    ended = write(tmp_path / "n.log", [LINE, ""])  # ended by a newline
    for path in (flushed, ended):
        assert funasr_log.scan_files([path], time="total").steps[0].seconds == 0.125
        assert funasr_log.scan_files([path]).steps[0].seconds == 0.1


def test_a_bad_last_line_without_newline_is_an_example_too(tmp_path):
    path = write(tmp_path / "t.log", [LINE, "[default0]:train, rank: 0, no times"])
    scan = funasr_log.scan_files([path])
    assert scan.bad_examples == [
        f"{path}:2: no total_time and not all of data_load, forward_time, "
        "backward_time, optim_time: [default0]:train, rank: 0, no times"
    ]


def test_order_steps_per_rank_numbers_sorts_and_drops_repeats():
    steps = [
        Step(-1, 0.2, rank=1),
        Step(5, 0.1, 8, 100, rank=0),
        Step(-1, 0.3, rank=1),
        Step(2, 0.1, 8, 100, rank=0),
        Step(5, 0.1, 8, 100, rank=0),
        Step(5, 0.1, 8, 104, rank=0),  # another shape: not a repeat
        Step(0, 0.1, 8, 100, rank=0),  # step 0 is numbered already
    ]
    out = funasr_log.order_steps(steps)
    assert [(s.rank, s.index, s.seconds) for s in out] == [
        (0, 0, 0.1),
        (0, 2, 0.1),
        (0, 5, 0.1),
        (0, 5, 0.1),
        (1, 1, 0.2),
        (1, 2, 0.3),
    ]
    assert [s.shape for s in out[2:4]] == [(8, 100), (8, 104)]


# --- bad numbers and fuzzing -------------------------------------------------------------------

BAD_TIMES = ["inf", "nan", "1e309", "-0.5", "1..2", "9" * 400, "-inf"]


@pytest.mark.parametrize("value", BAD_TIMES)
@pytest.mark.parametrize("layout", ["fast", "slow"])
def test_a_time_that_is_not_a_finite_number_of_seconds_makes_a_bad_line(value, layout):
    line = (LINE if layout == "fast" else SLOW).replace("'0.020'", f"'{value}'").encode()
    assert funasr_log.fast_fields(line) is None
    kind, why = parse_line(line)
    assert kind == "bad" and "not a finite number of 0 or more seconds: forward_time" in why


@pytest.mark.parametrize("field", [b"total step: 7", b"step_in_epoch: 2", b"('batch_size', 4)", b"rank: 1"])
def test_an_integer_too_long_for_int_is_no_crash(field):
    """int() refuses more than 4300 digits: the fast path never sees such a number, the slow path
    reads it as absent."""
    key = field.rsplit(b" ", 1)[0]
    line = LINE.encode().replace(field, key + b" " + b"9" * 5000 + (b")" if field.endswith(b")") else b""))
    parsed = parse_line(line)
    assert parsed is not None and parsed[0] in ("train", "bad")


def test_a_bad_line_is_counted_with_an_example_and_the_rest_judged_without_it(tmp_path):
    from ftenv.watchdog import stats
    from support.steplogs import recipe_run

    lines = recipe_run(stall=True).lines
    at = next(i for i, x in enumerate(lines) if "total step: 57," in x)
    bad = [*lines[:at], lines[at].replace("'total_time': '", "'total_time': '1e309"), *lines[at + 1 :]]
    without = [*lines[:at], *lines[at + 1 :]]
    (tmp_path / "bad.log").write_text("\n".join(bad) + "\n")
    (tmp_path / "without.log").write_text("\n".join(without) + "\n")
    scan = funasr_log.scan_files([str(tmp_path / "bad.log")])
    assert (
        scan.bad_lines == 1
        and "total_time '" in scan.bad_examples[0]
        and f":{at + 1}:" in scan.bad_examples[0]
    )
    clean = funasr_log.scan_files([str(tmp_path / "without.log")])
    assert stats.summarize(scan.steps).to_dict() == stats.summarize(clean.steps).to_dict()


def _fuzzed(seed: int = 20) -> bytes:
    """A recipe log, damaged line by line: byte flips, cut lines, numbers swapped for huge or
    unreadable ones, huge lines, glued lines. Seeded: the same bytes every run."""
    import random

    from support.steplogs import recipe_run

    rng = random.Random(seed)
    out = []
    for text in recipe_run(stall=True).lines:
        line = text.encode()
        roll = rng.random()
        if roll < 0.15:
            flips = bytearray(line)
            for _ in range(rng.randrange(1, 6)):
                flips[rng.randrange(len(flips))] = rng.randrange(256)
            line = bytes(flips)
        elif roll < 0.25:
            line = line[: rng.randrange(len(line))]
        elif roll < 0.40:
            swap = rng.choice(
                [b"inf", b"nan", b"1e309", b"-3", b"9" * 500, b"9" * 5000, b"0." + b"0" * 300 + b"1", b""]
            )
            line = re_sub_number(line, swap, rng)
        elif roll < 0.42:
            line = line * rng.randrange(100, 400)  # up to ~400 kB on one line
        elif roll < 0.45:
            line = b"\r" + line + b"\r" + line[::-1]
        out.append(line)
    return b"\n".join(out) + b"\n"


def re_sub_number(line: bytes, swap: bytes, rng) -> bytes:
    import re

    spots = [m.span() for m in re.finditer(rb"\d+(?:\.\d+)?", line)]
    if not spots:
        return line
    a, b = rng.choice(spots)
    return line[:a] + swap + line[b:]


def test_fuzzed_logs_never_crash_and_the_watchdog_passes_them_through_byte_for_byte(tmp_path):
    import subprocess
    import sys

    from support import run_ftenv

    data = _fuzzed()
    path = tmp_path / "fuzzed.log"
    path.write_bytes(data)
    # In process: every line, both time fields, the splitter in odd chunk sizes.
    splitter = funasr_log.LineSplitter()
    for i in range(0, len(data), 777):
        for line in splitter.feed(data[i : i + 777])[0]:
            parse_line(line)
            parse_line(line, time="total")
    for time in ("phases", "total"):
        r = run_ftenv("analyze", "--time", time, str(path))
        assert (
            r.returncode in (0, 1, 3) and "Traceback" not in r.stderr and "internal error" not in r.stderr
        ), r.stderr
        assert "verdict:" in r.stdout and "step-like lines without what a step needs" in r.stdout
    watched = subprocess.run(
        [sys.executable, "-m", "ftenv.cli", "watch", "--", "cat", str(path)], capture_output=True, timeout=60
    )
    assert watched.returncode == 0 and b"Traceback" not in watched.stderr
    assert b"internal error" not in watched.stdout + watched.stderr
    kept = [ln for ln in watched.stdout.split(b"\n") if not ln.startswith(b"[ftenv-watch]")]
    assert b"\n".join(kept) == data
