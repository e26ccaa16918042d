"""`ftenv analyze` and the FunASR log parser (ftenv.watchdog.funasr_log) on generated logs in the real line
format: the run of FunASR issue #3704, the fixed run, several ranks, rotated files, validation and noise
lines, and bad input (empty, binary, missing, no step lines)."""

from __future__ import annotations

import gzip
import json
import random
import sys

import pytest

from ftenv import cli, outcome
from ftenv.watchdog import analyze, funasr_log, stats
from ftenv.watchdog.funasr_log import MAX_LINE, LineSplitter, parse_line
from ftenv.watchdog.step import Step
from support import run_ftenv as ftenv
from support.steplogs import NOISE, ddp_log, field_report_log, train_line, val_line

#: A training line as funasr-train-ds (FunASR 1.4's Trainer.log) prints it.
REAL = (
    "[2026-11-29 15:18:55,943][root][INFO] - train, rank: 0, epoch: 0/1, data_slice: 0/1, "
    "step_in_slice: 2/6, step_in_epoch: 2, total step: 2, (loss_avg_rank: 6.160), (loss_avg_slice: "
    "6.163), (ppl_avg_slice: 4.750e+02), (acc_avg_slice: 0.000), (lr: 6.000e-05), "
    "[('batch_size_speech', 2), ('batch_size_x_frames', 56), ('batch_size_real_frames', 51), "
    "('padding_frames', 5), ('acc', 0.0), ('loss', 6.16), ('batch_size', 2), "
    "('batch_size_x_tokens', 86), ('batch_size_real_tokens', 82), ('padding_tokens', 4), "
    "('dialog_turns_max', 1), ('dialog_turns_avg', 1.0)], {'data_load': '0.011', 'forward_time': "
    "'0.015', 'backward_time': '0.017', 'optim_time': '0.004', 'total_time': '0.050'}, GPU, memory: "
    "usage: 0.000 GB, peak: 0.000 GB, cache: 0.000 GB, cache_peak: 0.000 GB"
)


def write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# --- the parser -------------------------------------------------------------------------------


def test_parses_the_real_line():
    kind, step = parse_line(REAL.encode())
    assert kind == "train"
    assert (step.rank, step.index, step.batch, step.padded_len) == (0, 2, 2, 43)
    assert step.seconds == pytest.approx(0.011 + 0.015 + 0.017 + 0.004)
    assert dict(step.phases)["forward_time"] == 0.015
    assert parse_line(REAL.encode(), time="total")[1].seconds == 0.050


def test_field_order_or_prefix_changes_still_parse_through_the_slow_path():
    torchrun = b"[default3]:" + REAL.replace("rank: 0,", "rank: 3,").encode()
    assert parse_line(torchrun)[1].rank == 3
    reordered = REAL.replace("{'data_load': '0.011', ", "{").replace(
        "'total_time': '0.050'", "'total_time': '0.050', 'data_load': '0.011'"
    )
    kind, step = parse_line(reordered.encode())
    assert kind == "train" and step.seconds == pytest.approx(0.047) and step.batch == 2


def test_validation_noise_and_almost_step_lines():
    assert parse_line(val_line(0, 1).encode()) == ("val", None)
    assert parse_line(NOISE[0].encode()) == ("mark", ("epoch", 0))  # "Train epoch: 0, rank: 0"
    assert parse_line(NOISE[1].encode()) == ("mark", ("validation", 0))  # "Validate epoch: 0, rank: 0"
    assert parse_line(NOISE[4].encode()) == ("bad", "no readable rank")
    assert parse_line(NOISE[5].encode())[0] == "bad"
    assert parse_line(NOISE[6].encode()) is None  # "retrain, rank:" is not a step
    assert parse_line(NOISE[7].encode()) is None  # "interval, rank:" is not validation
    no_shape = REAL.replace("('batch_size', 2), ", "")
    kind, step = parse_line(no_shape.encode())
    assert kind == "train" and step.shape is None
    only_total = REAL.replace("'optim_time': '0.004', ", "")
    assert parse_line(only_total.encode())[1].seconds == 0.050
    assert parse_line(b"\xff\xfe train, rank: \x00") == ("bad", "no readable rank")
    assert parse_line(REAL.encode() + b" " * MAX_LINE) is None


def test_a_tag_inside_a_word_is_not_a_step_on_the_fast_path_either():
    inside = REAL.replace("- train, rank:", "- xtrain, rank:").encode()
    assert funasr_log.fast_fields(inside) is None and parse_line(inside) is None
    assert funasr_log.fast_fields(REAL.encode()) is not None


@pytest.mark.parametrize("slow_path", [False, True])
def test_batch_0_gives_no_shape(slow_path):
    line = REAL.replace("('batch_size', 2)", "('batch_size', 0)").replace(
        "('batch_size_x_tokens', 86)", "('batch_size_x_tokens', 0)"
    )
    if slow_path:  # torchrun's prefix and a reordered dict leave Trainer.log's exact layout
        line = "[default0]:" + line.replace("{'data_load': '0.011', ", "{") + " 'data_load': '0.011'"
    kind, step = parse_line(line.encode())
    assert kind == "train" and step.batch is None and step.shape is None
    if not slow_path:
        assert funasr_log.fast_fields(line.encode())[2:4] == (None, None)


def test_duplicates_are_dropped_only_when_identical():
    same = [Step(5, 0.1, 8, 100), Step(5, 0.1, 8, 100)]
    assert len(funasr_log.order_steps(same)) == 1
    differ = [Step(5, 0.1, 8, 100), Step(5, 0.2, 8, 100)]  # same step number, another time
    assert [s.seconds for s in funasr_log.order_steps(differ)] == [0.1, 0.2]


def test_line_splitter_keeps_offsets_and_bounds_memory():
    rng = random.Random(5)
    for _ in range(200):
        parts = []
        for _ in range(rng.randrange(1, 30)):
            n = rng.choice([rng.randrange(0, 50), rng.randrange(MAX_LINE - 5, MAX_LINE + 20), 3 * MAX_LINE])
            parts.append(b"a" * n + (b"\n" if rng.random() < 0.8 else b""))
        data = b"".join(parts)
        expected = data.split(b"\n")[:-1]
        splitter, got, pos = LineSplitter(), [], 0
        while pos < len(data):
            chunk = data[pos : pos + rng.choice([1, 7, 5000, 70000, 300000])]
            lines, end = splitter.feed(chunk)
            for line in lines:
                end += len(line) + 1
                assert chunk[end - 1 : end] == b"\n"
                got.append(line)
            assert len(splitter._carry) <= MAX_LINE
            pos += len(chunk)
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g == e or (len(e) > MAX_LINE and g in (b"", e))


# --- the command ------------------------------------------------------------------------------


def test_field_report_log(tmp_path):
    lines, _ = field_report_log()
    r = ftenv("analyze", write(tmp_path / "train.log", lines))
    assert r.returncode == 1, r.stderr  # FAIL
    out = r.stdout
    assert "382 training steps (rank 0), 6 validation lines, 4 step-like lines" in out
    assert "step time histogram" in out and "#" * 40 + " 323" in out and " 59\n" in out
    # The 59 new shapes: the first on the run's first step, set apart as start-up; 58 slow.
    assert (
        "slow steps (>= 3x the baseline 0.098 s" in out
        and "58 of 381, 58 on shapes new to their rank (100%)" in out
    )
    assert "1 start-up step set apart, not judged: 1 x run start (step 1); slowest 1.060 s" in out
    assert "mean step time 0.243 s over 381 steps" in out
    assert "estimated without the slow steps: 0.098 s" in out
    assert "verdict: FAIL" in out and "fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in out
    assert "Traceback" not in r.stderr


def test_fixed_run_flags_nothing(tmp_path):
    lines, _ = field_report_log(fixed=True)
    r = ftenv("analyze", "--json", write(tmp_path / "fixed.log", lines))
    s = json.loads(r.stdout)["summary"]
    assert r.returncode == 0  # PASS
    assert s["verdict"] == "PASS" and s["n_slow"] == 0 and s["fix"] is None
    assert s["mean"] == pytest.approx(0.100, abs=0.002)


def test_json_numbers(tmp_path):
    lines, _ = field_report_log()
    d = json.loads(ftenv("analyze", "--json", write(tmp_path / "t.log", lines)).stdout)
    s = d["summary"]
    assert (s["n_steps"], s["n_slow"], s["slow_on_new"], s["verdict"]) == (381, 58, 58, "FAIL")
    assert s["n_apart"] == 1 and s["apart_steps"][0]["apart"] == "run start"
    assert s["mean"] == pytest.approx(0.243, abs=0.002) and round(s["mean_without_slow"], 2) == 0.10
    assert d["val_lines"] == 6 and d["bad_lines"] == 4
    assert sum(b["count"] for b in d["per_rank"]["0"]["histogram"]) == 382


def test_ranks_interleaved_and_rotated_files_in_any_order(tmp_path):
    lines, _ = field_report_log(ranks=3)
    whole = json.loads(ftenv("analyze", "--json", write(tmp_path / "all.log", lines)).stdout)
    assert whole["summary"]["ranks"] == [0, 1, 2]
    for r in ("0", "1", "2"):
        assert whole["per_rank"][r]["n_slow"] == 58 and whole["per_rank"][r]["slow_on_new"] == 58
    assert whole["summary"]["n_slow"] == 3 * 58
    # Rotated: train.log holds the newest lines; given newest first, one of them gzipped.
    third = len(lines) // 3
    old, mid, new = lines[:third], lines[third : 2 * third], lines[2 * third :]
    with gzip.open(tmp_path / "train.log.2.gz", "wt") as fh:
        fh.write("\n".join(old) + "\n")
    files = [
        write(tmp_path / "train.log", new),
        write(tmp_path / "train.log.1", mid),
        str(tmp_path / "train.log.2.gz"),
    ]
    rotated = json.loads(ftenv("analyze", "--json", *files).stdout)
    assert rotated["summary"] == whole["summary"]
    # Overlapping files (the same lines twice) count once.
    twice = json.loads(ftenv("analyze", "--json", *files, files[1]).stdout)
    assert twice["summary"]["n_steps"] == whole["summary"]["n_steps"]


def test_text_output_for_several_ranks(tmp_path):
    lines, _ = field_report_log(ranks=2)
    out = ftenv("analyze", "--top", "3", write(tmp_path / "t.log", lines)).stdout
    assert "rank 0: 382 steps" in out and "rank 1: 382 steps" in out
    assert "... 113 more (--all shows every one)" in out
    assert "2 x run start (rank 0 step 1, rank 1 step 1)" in out


def test_bad_input_gives_a_message_not_a_traceback(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "model.pt"
    binary.write_bytes(bytes(range(256)) * 4000)
    nosteps = write(tmp_path / "nosteps.log", [NOISE[0], NOISE[3], val_line(0, 1)])
    for path, words in (
        (empty, "no FunASR training step lines"),
        (binary, "binary"),
        (nosteps, "1 validation"),
    ):
        r = ftenv("analyze", str(path))  # nothing to judge: unusable input, never PASS
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    missing = ftenv("analyze", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "No such file" in missing.stderr
    folder = ftenv("analyze", str(tmp_path))
    assert folder.returncode == 2 and "directory" in folder.stderr
    # A missing file among good ones: the good ones are analysed, the exit says something was wrong.
    lines, _ = field_report_log()
    mixed = ftenv("analyze", write(tmp_path / "t.log", lines), str(tmp_path / "nope.log"))
    assert mixed.returncode == 2 and "verdict: FAIL" in mixed.stdout
    assert "Traceback" not in missing.stderr + folder.stderr + mixed.stderr


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    lines, _ = field_report_log()
    log = write(tmp_path / "t.log", lines)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    assert cli.main(["analyze", log, "--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "pip install matplotlib" in err
    assert not (tmp_path / "p.png").exists()


def test_plot_with_matplotlib(tmp_path):
    """matplotlib is in the test extra: without it this fails (exit 2), it does not skip."""
    lines, _ = field_report_log(ranks=2)
    png = tmp_path / "p.png"
    r = ftenv("analyze", write(tmp_path / "t.log", lines), "--plot", str(png))
    assert r.returncode == 1 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # FAIL, plot made


def test_histogram_bins():
    assert analyze.histogram([]) == []
    assert analyze.histogram([1.0, 1.0]) == [(1.0, 1.0, 2)]
    h = analyze.histogram([0.0, 0.5, 1.0], bins=2)
    assert [c for _, _, c in h] == [1, 2]


def test_scan_counts_lines_and_numbers_unnumbered_steps(tmp_path):
    no_index = REAL.replace("total step: 2, ", "")
    path = write(tmp_path / "x.log", [no_index, no_index, train_line_for(7)])
    scan = funasr_log.scan_files([path])
    assert scan.lines == 3 and [s.index for s in scan.steps] == [1, 2, 7]


def train_line_for(index: int) -> str:
    from support.steplogs import GenStep

    return train_line(GenStep(0, index, 4, 100, 0.01, 0.03, 0.04, 0.01))


# --- DDP: a rank waiting for another rank's new shape ------------------------------------------


def test_ddp_waits_are_named_and_counted_with_new_shapes(tmp_path):
    lines, _ = ddp_log(ranks=2)
    path = write(tmp_path / "ddp.log", lines)
    out = ftenv("analyze", "--all", path).stdout
    # Each rank's first step (a new shape) is start-up, set apart.
    assert "70 of 238, 38 on shapes new to their rank, 32 waiting for another rank's new shape" in out
    assert "new-shape: waits for rank 1's new shape (DDP all-reduce)" in out
    assert "new-shape: waits for rank 0's new shape (DDP all-reduce)" in out
    rows = [line for line in out.splitlines() if line.rstrip().endswith("seen-shape")]
    assert rows == []  # no slow step left unexplained
    s = json.loads(ftenv("analyze", "--json", path).stdout)["summary"]
    assert s["slow_causes"] == {"new-shape": 70} and s["slow_waiting"] == 32


def test_ddp_wait_with_one_rank_logged_by_its_backward_only_signature(tmp_path):
    lines, _ = ddp_log(ranks=2, only_rank=0)
    out = ftenv("analyze", "--all", write(tmp_path / "rank0.log", lines)).stdout
    assert "16 waiting for another rank's new shape" in out
    assert "new-shape: waits for another rank's new shape (DDP all-reduce)" in out


# --- exit codes: a CI gate reads them -----------------------------------------------------------


def test_exit_codes_pass_fail_unusable_inconclusive(tmp_path):
    fixed, _ = field_report_log(fixed=True)
    issue, _ = field_report_log()
    few = [train_line(s) for s in field_report_log(fixed=True)[1][0][:6]]
    assert ftenv("analyze", write(tmp_path / "pass.log", fixed)).returncode == outcome.EXIT[outcome.PASS] == 0
    assert ftenv("analyze", write(tmp_path / "fail.log", issue)).returncode == outcome.EXIT[outcome.FAIL] == 1
    inconclusive = ftenv("analyze", write(tmp_path / "few.log", few))
    assert "verdict: INCONCLUSIVE" in inconclusive.stdout
    assert inconclusive.returncode == outcome.EXIT[outcome.INCONCLUSIVE] == 3
    assert (
        ftenv("analyze", write(tmp_path / "none.log", ["no steps here"])).returncode == outcome.UNUSABLE == 2
    )
    assert ftenv("analyze", "--json", write(tmp_path / "fail2.log", issue)).returncode == 1
    assert ftenv("analyze", "--bins", "1", str(tmp_path / "pass.log")).returncode == 2  # usage


def test_an_internal_error_is_neither_pass_nor_fail(tmp_path, monkeypatch, capsys):
    lines, _ = field_report_log(fixed=True)
    log = write(tmp_path / "t.log", lines)

    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(stats, "summarize", broken)
    monkeypatch.delenv("FTENV_DEBUG", raising=False)
    rc = cli.main(["analyze", log])
    err = capsys.readouterr().err
    assert rc == outcome.INTERNAL_ERROR == 4 and rc not in (0, 1)
    assert "ftenv analyze: internal error (a bug in ftenv, not a verdict): ZeroDivisionError: a bug" in err
    assert "Traceback" not in err
    monkeypatch.setenv("FTENV_DEBUG", "1")
    assert cli.main(["analyze", log]) == 4 and "Traceback" in capsys.readouterr().err
