"""ftenv.watchdog.timer: the watchdog for custom training loops gives the same hint and summary."""

from __future__ import annotations

import io

from ftenv.watchdog.timer import StepTimer
from support.steplogs import field_report_run, fixed_run


class Clock:
    """A fake perf_counter that the test advances by each step's time."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def drive(run) -> tuple[StepTimer, io.StringIO, list[list[str]]]:
    clock, out = Clock(), io.StringIO()
    timer = StepTimer(stream=out, clock=clock, rank=0)
    returned = []
    for s in run:
        clock.now += s.seconds
        returned.append(timer.tick(batch=s.batch, padded_len=s.padded))
    return timer, out, returned


def test_issue_3704_pattern_gets_the_watchdogs_hint_and_verdict(monkeypatch):
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "0")
    timer, out, returned = drive(field_report_run())
    lines = out.getvalue().splitlines()
    assert sum("SLOW STEP" in x for x in lines) == 1 and sum("PATTERN" in x for x in lines) == 1
    at = next(i for i, x in enumerate(lines) if "SLOW STEP" in x)
    full, detail = lines[at], lines[at + 1]
    assert full.startswith("[ftenv-watch] SLOW STEP rank 0 step ") and "new to this rank" in full
    assert "fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in full and len(full) <= 200
    assert detail.startswith("[ftenv-watch]   ") and "Fix: set TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in detail
    assert [x for r in returned for x in r] == lines  # tick() returns what it prints
    s = timer.finish()
    # 59 new shapes, the first of them on the loop's first step: start-up, set apart (not slow).
    assert s.verdict == "FAIL" and s.n_slow == 58 and s.slow_on_new == 58
    assert [(st.index, st.apart, st.new_shape) for st in s.apart_steps] == [(1, "run start", True)]
    assert "[ftenv-watch] verdict: FAIL" in out.getvalue()


def test_steady_loop_is_quiet_and_passes():
    timer, out, _ = drive(fixed_run())
    assert out.getvalue() == ""
    assert timer.finish().verdict == "PASS"


def test_record_takes_own_timings_and_works_without_shapes():
    out = io.StringIO()
    timer = StepTimer(stream=out, rank=3)
    for i in range(30):
        timer.record(1.0 if i == 20 else 0.1)
    text = out.getvalue()
    assert "SLOW STEP rank 3 step 21: 1.000 s = 10.0x" in text and "batch shape unknown" in text
    assert timer.summary().verdict == "FAIL"  # max/median 10x, though shapes are unknown
