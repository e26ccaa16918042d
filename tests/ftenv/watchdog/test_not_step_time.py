"""What is not step time (ftenv.watchdog.not_step_time, ftenv.watchdog.step.apart_reason), on logs shaped like
FunASR's recipe (tests/support/steplogs.recipe_run: 3 epochs, validation and a checkpoint every 40
steps, the DataLoader's start in each epoch's first step): start-up steps are set apart, pauses
are accounted, and the verdict names the per-shape stall, counted exactly, only when it is there.
Also: a FAIL lists the failed rules first, the others marked passed (watchdog, analyzer,
self-check)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ftenv import outcome
from ftenv.attention.sdpa import FIX
from ftenv.selfcheck import measured, verdict
from ftenv.watchdog import fixes, stats, thresholds
from ftenv.watchdog.slow_step_lines import SlowStepLines
from ftenv.watchdog.step import EPOCH_START, RUN_START, Step
from support import run_ftenv
from support.steplogs import EPOCH_STEPS, recipe_run

WATCH = [sys.executable, "-m", "ftenv.cli", "watch"]


def _log(tmp_path, lines, name="train.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _analyze(tmp_path, lines, *args):
    r = run_ftenv("analyze", "--json", *args, _log(tmp_path, lines))
    return r.returncode, json.loads(r.stdout)


def test_a_healthy_multi_epoch_run_passes_without_the_fix(tmp_path):
    run = recipe_run(stall=False)
    rc, d = _analyze(tmp_path, run.lines)
    s = d["summary"]
    assert (rc, s["verdict"], s["fix"], s["n_slow"]) == (0, "PASS", None, 0), s["reasons"]
    assert [(a["index"], a["apart"]) for a in s["apart_steps"]] == [
        (1, RUN_START),
        *((i, EPOCH_START) for i in run.epoch_starts[1:]),
    ]
    # validation + checkpoint after steps 40, 80, ... carried by the next step's total_time
    assert [p["after_step"] for p in s["pauses"]] == run.pauses_after
    assert all(p["before"] == ["validation", "checkpoint"] for p in s["pauses"])
    assert d["markers"] == {"epoch": 3, "validation": 9, "checkpoint": 9}
    text = run_ftenv("analyze", _log(tmp_path, run.lines, "t.log")).stdout
    assert "6 pauses between steps, 27.0 s in all (validation at steps 40, 80, 160, 200, 280, 320;" in text
    assert "3 start-up steps set apart, not judged: 1 x run start (step 1), 2 x epoch start" in text
    # ... and the wall clock adds up to FunASR's total_time summed over the steps
    total = sum(
        float(ln.split("'total_time': '")[1].split("'")[0]) for ln in run.lines if "- train, rank" in ln
    )
    wall = next(ln for ln in text.splitlines() if ln.startswith("time in all: "))
    assert wall.endswith(f"= {total:.1f} s") and " s between steps = " in wall
    assert "DataLoader" not in text and FIX not in text


def test_the_same_run_with_the_per_shape_stall_fails_with_the_fix_and_counts_it_exactly(tmp_path):
    run = recipe_run(stall=True)
    rc, d = _analyze(tmp_path, run.lines)
    s = d["summary"]
    assert (rc, s["verdict"]) == (1, "FAIL")
    assert s["fix"].startswith(fixes.SET_FIX)
    assert [st["index"] for st in s["slow_steps"]] == run.stalled
    assert s["n_slow"] == s["slow_on_new"] == len(run.stalled) == 44
    assert s["slow_causes"] == {"new-shape": 44}


def test_pauses_are_never_slow_steps_with_the_total_time_either(tmp_path):
    """--time total: the step after a validation carries it; that step is set apart."""
    run = recipe_run(stall=False)
    rc, d = _analyze(tmp_path, run.lines, "--time", "total")
    s = d["summary"]
    assert (rc, s["verdict"], s["n_slow"], s["fix"]) == (0, "PASS", 0, None), s["reasons"]
    carried = sorted(a["index"] for a in s["apart_steps"] if a["apart"] == "carries a pause")
    assert carried == [i + 1 for i in run.pauses_after]
    text = run_ftenv("analyze", "--time", "total", _log(tmp_path, run.lines, "t.log")).stdout
    assert "9 steps set apart, not judged: 1 x run start (step 1), 6 x carries a pause (steps 41, 81," in text


def test_a_dataloader_falling_behind_mid_epoch_is_still_named(tmp_path):
    run = recipe_run(stall=False)
    # 30 mid-epoch steps (step_in_epoch 50-79 of the second epoch) wait 0.6 s for data.
    out = []
    for line in run.lines:
        for k in range(50, 80):
            if f"step_in_epoch: {k}, total step: {EPOCH_STEPS + k}," in line:
                line = line.replace("{'data_load': '0.011'", "{'data_load': '0.611'")
        out.append(line)
    rc, d = _analyze(tmp_path, out)
    s = d["summary"]
    assert (rc, s["verdict"], s["fix"]) == (1, "FAIL", fixes.DATA_FIX)
    assert s["slow_causes"] == {"data": 30}


def test_the_watchdog_says_nothing_on_the_healthy_run_and_names_the_stall(tmp_path):
    healthy = subprocess.run(
        [*WATCH, "--", "cat", _log(tmp_path, recipe_run(False).lines, "h.log")],
        capture_output=True,
        timeout=60,
    )
    out = healthy.stdout.decode()
    assert healthy.returncode == 0 and "SLOW STEP" not in out and "slow step rank" not in out
    assert "[ftenv-watch] verdict: PASS" in out and "[ftenv-watch] 3 start-up steps set apart" in out
    assert "[ftenv-watch] 6 pauses between steps" in out
    total = subprocess.run(
        [*WATCH, "--time", "total", "--", "cat", _log(tmp_path, recipe_run(False).lines, "t.log")],
        capture_output=True,
        timeout=60,
    ).stdout.decode()
    assert "SLOW STEP" not in total and "[ftenv-watch] verdict: PASS" in total
    assert "6 x carries a pause (steps 41, 81, 161, 201, 281, 321)" in total
    stalled = subprocess.run(
        [*WATCH, "--", "cat", _log(tmp_path, recipe_run(True).lines, "s.log")],
        capture_output=True,
        timeout=60,
    )
    out = stalled.stdout.decode()
    assert "likely: cuDNN attention plan build" in out and "likely: data loading" not in out
    assert "[ftenv-watch] verdict: FAIL" in out and "44 slow steps" in out


# --- a FAIL says what failed first --------------------------------------------------------------


def _one_stall() -> list[Step]:
    """Flat steps on four repeating shapes and one huge stall: only the max rule fails."""
    steps = [Step(i, 0.100 + 0.001 * (i % 3), 2, 100 + 10 * (i % 4)) for i in range(1, 60)]
    steps.append(Step(60, 2.0, 2, 100))
    return steps


def test_a_fail_lists_the_failed_rule_first_and_the_others_as_passed():
    s = stats.summarize(_one_stall())
    assert s.verdict == outcome.FAIL
    assert s.reasons[0].startswith("slowest step is 19.") and "(FAIL at 10x)" in s.reasons[0]
    assert s.reasons[1].startswith(stats.PASSED + "steps on shapes new to their rank take 1.0x")
    assert s.reasons[2].startswith(stats.PASSED + "p95 step time is")
    assert s.failed_rules == [s.reasons[0]]


def test_the_watchdogs_fail_line_says_only_what_failed():
    w = SlowStepLines()
    for st in _one_stall():
        w.observe(st)
    verdict_line = next(ln for ln in w.summary_lines() if "verdict:" in ln)
    assert verdict_line.startswith("[ftenv-watch] verdict: FAIL: slowest step is ")
    assert "new to their rank" not in verdict_line and "p95" not in verdict_line


def test_the_selfchecks_own_fail_comes_first_and_the_step_rules_as_passed():
    steps = [Step(i, 0.100, 2, 100 + 10 * (i % 8)) for i in range(1, 40)]
    m = measured.Measured("compile", steps, thresholds.SELFCHECK["cpu"], fails=["3 recompiles (FAIL at > 0)"])
    r = verdict.verdict_of(m)
    reasons = r["summary"]["reasons"]
    assert r["verdict"] == "FAIL" and reasons[0] == "3 recompiles (FAIL at > 0)"
    assert all(x.startswith(stats.PASSED) for x in reasons[1:4]), reasons


@pytest.mark.parametrize(
    "nth, in_epoch, before, total, want",
    [
        (1, 7, (), False, RUN_START),
        (2, 1, (), False, EPOCH_START),
        (5, 9, ("epoch",), False, EPOCH_START),
        (5, 9, ("validation",), False, None),
        (5, 9, ("checkpoint",), True, "carries a pause"),
        (5, None, (), True, None),
    ],
)
def test_apart_reason(nth, in_epoch, before, total, want):
    from ftenv.watchdog.step import apart_reason

    assert apart_reason(nth, in_epoch, before, total) == want


# --- in process (a mutation run sees these) ------------------------------------------------------


def test_the_pauses_in_process():
    from ftenv.watchdog import not_step_time
    from ftenv.watchdog.funasr_log import scan_files

    run = recipe_run(stall=False)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.log"
        path.write_text("\n".join(run.lines) + "\n")
        steps = scan_files([str(path)]).steps
    pauses, total = not_step_time.account_pauses(steps, 0.098, 3.0)
    assert [i for _, i, _, _ in pauses] == run.pauses_after
    assert all(sec == pytest.approx(4.5, abs=0.01) for _, _, sec, _ in pauses)
    assert total == pytest.approx(6 * 4.5 + 0.001 * len(steps), abs=0.01)
    assert not_step_time.pause_text(pauses) == (
        "6 pauses between steps, 27.0 s in all (validation at steps 40, 80, 160, 200, 280, 320; "
        "checkpoint saves at steps 40, 80, 160, 200, 280, 320): not step time, never a slow step"
    )
    assert not_step_time.pause_text([]) is None
    # A pause the trainer did not log a reason for is shown when it is at least K x the baseline.
    odd = [Step(1, 0.1, pause=0.0), Step(2, 0.1, pause=0.29), Step(3, 0.1, pause=0.31)]
    shown, total = not_step_time.account_pauses(odd, 0.1, 3.0)
    assert shown == [(0, 2, 0.31, ())] and total == pytest.approx(0.6)
    assert (
        not_step_time.pause_text(shown)
        == "1 pause between steps, 0.3 s in all (1 other): not step time, never a slow step"
    )
    assert not_step_time.account_pauses(odd, 0.0, 3.0)[0] == []  # no baseline: only logged pauses


def test_the_start_up_line_in_process():
    from ftenv.watchdog import not_step_time

    one = [
        Step(1, 2.5, apart=RUN_START),
        Step(121, 4.3, apart=EPOCH_START),
        Step(241, 4.2, apart=EPOCH_START),
    ]
    assert not_step_time.apart_text(one) == (
        "3 start-up steps set apart, not judged: 1 x run start (step 1), 2 x epoch start (steps 121, 241); "
        "slowest 4.300 s"
    )
    ranks = [Step(1, 1.0, rank=0, apart=RUN_START), Step(1, 1.1, rank=1, apart=RUN_START)]
    assert "2 x run start (rank 0 step 1, rank 1 step 1)" in not_step_time.apart_text(ranks)
    many = [Step(i, 1.0, apart=EPOCH_START) for i in range(1, 10)]
    assert "(steps 1, 2, 3, 4, 5, 6 and 3 more)" in not_step_time.apart_text(many)
    assert not_step_time.apart_text([]) is None
