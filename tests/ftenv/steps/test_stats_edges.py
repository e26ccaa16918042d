"""ftenv.steps (stats, detector, model): the edges a mutation run (docs/testing.md) found
unchecked: the DDP fix rule and the live detector's DDP waits, zero-second steps, the floors and
bounds (min_new/min_seen of 1, the baseline's min_seen, the detector's windows and warm-up), what
the summary's JSON carries. Times are binary fractions so that ratios are exact."""

from __future__ import annotations

import json

import pytest

from ftenv.outcome import FAIL, PASS
from ftenv.steps import detector, fixes, stats
from ftenv.steps import step as step_types
from ftenv.steps.detector import Detector
from ftenv.steps.step import NEW_SHAPE, SEEN_SHAPE, Step
from ftenv.steps.thresholds import Thresholds

B = 0.125


def events(detector: Detector, steps: list[Step]) -> list[detector.SlowEvent]:
    return [e for _, e in map(detector.observe, steps) if e]


# --- the summary and the verdict -----------------------------------------------------------------


def test_one_new_and_one_seen_step_are_enough_when_the_minimums_say_so():
    steps = [Step(1, B, 8, 100), Step(2, B, 8, 100)]
    assert stats.summarize(steps, Thresholds(min_new=1, min_seen=1)).verdict == PASS
    assert stats.summarize(steps, Thresholds(min_new=0, min_seen=0)).verdict == PASS


def test_reasons_when_nothing_can_be_compared():
    assert stats.summarize([]).reasons == ["no training steps"]
    few = stats.summarize([Step(1, B, 8, 100), Step(2, B, 8, 100)])
    assert few.reasons[0].startswith("too few steps to compare new and seen shapes (1 on new shapes, 1 on")


def ddp_fix_run(waiting: int, other: int, new_slow: int = 0) -> stats.Summary:
    """One logged rank, 100 steady steps on 3 shapes (first occurrences new, not slow), then
    `waiting` seen-shape stalls in backward only (DDP waits), `other` seen-shape stalls in forward,
    and `new_slow` slow steps on new shapes among 16 fast new ones (so that the shape rule, new
    median over seen median, passes). About 8 slow steps of 120: p95 FAILs."""
    steps = [Step(i, B, 8, 100 + 4 * (i % 3)) for i in range(1, 101)]
    extra = 7 * B
    steps += [
        Step(100 + i, 8 * B, 8, 100, phases=(("forward_time", 0.0), ("backward_time", extra)))
        for i in range(1, waiting + 1)
    ]
    steps += [Step(200 + i, 8 * B, 8, 100, phases=(("forward_time", extra),)) for i in range(1, other + 1)]
    steps += [Step(300 + i, 8 * B if i <= new_slow else B, 8, 200 + 4 * i) for i in range(1, 17)]
    return stats.summarize(steps)


def test_ddp_waits_get_the_shape_fix_when_at_least_half_the_slow_steps_are_new_shape():
    half = ddp_fix_run(waiting=4, other=4)
    assert (
        half.verdict == FAIL and half.slow_waiting == 4 and half.slow_causes == {NEW_SHAPE: 4, SEEN_SHAPE: 4}
    )
    assert half.new_over_seen < 3 and half.fix == fixes.SHAPE_FIX  # 4 of 8: at the share
    fewer = ddp_fix_run(waiting=1, other=7)
    assert fewer.verdict == FAIL and fewer.slow_waiting == 1 and fewer.fix is None
    # New-shape slow steps without any DDP wait, the shape rule passing: no shape fix either.
    no_wait = ddp_fix_run(waiting=0, other=4, new_slow=4)
    assert no_wait.slow_causes == {NEW_SHAPE: 4, SEEN_SHAPE: 4} and no_wait.new_over_seen < 3
    assert no_wait.verdict == FAIL and no_wait.fix is None


def test_the_slow_steps_reason_mentions_waits_only_when_there_are_some():
    plain = ddp_fix_run(waiting=0, other=8)
    line = next(r for r in plain.reasons if "slow steps" in r)
    assert "0 of them on new shapes; " in line and "waiting" not in line
    waits = ddp_fix_run(waiting=4, other=4)
    line = next(r for r in waits.reasons if "slow steps" in r)
    assert "0 of them on new shapes and 4 waiting for another rank's new shape (DDP all-reduce);" in line


def test_one_seen_shape_stall_gets_no_data_fix():
    steps = [Step(i, 11 * B if i == 50 else B, 8, 100 + 4 * (i % 3)) for i in range(1, 101)]
    s = stats.summarize(steps)
    assert s.verdict == FAIL and s.slow_causes == {SEEN_SHAPE: 1} and s.fix is None
    two = [Step(i, 11 * B if i in (50, 60) else B, 8, 100 + 4 * (i % 3)) for i in range(1, 101)]
    assert stats.summarize(two).fix is None


def test_zero_second_steps_give_no_ratio_and_no_crash():
    # FunASR prints times with 3 decimals: a tiny step logs 0.000.
    s = stats.summarize([Step(i, 0.0, 8, 100 + 4 * (i % 3)) for i in range(1, 30)])
    assert s.new_over_seen != s.new_over_seen and s.p95_over_median != s.p95_over_median  # NaN
    assert s.n_slow == 0 and s.time_lost == 0  # not "29 slow steps (>= 3x the baseline 0.000 s)"
    d = Detector()
    assert events(d, [Step(i, 0.0, 8, 100) for i in range(1, 30)]) == []


@pytest.mark.parametrize("n_seen, baseline", [(2, 8 * B), (3, B), (4, B)])
def test_the_baseline_is_the_seen_median_from_min_seen_steps(n_seen, baseline):
    steps = [Step(i, 8 * B, 8, 100 + 4 * i) for i in range(1, 6)]
    steps += [Step(5 + i, B, 8, 104) for i in range(1, n_seen + 1)]
    assert stats.summarize(steps).baseline == baseline  # min_seen = 3


def test_given_new_shape_flags_are_kept():
    steps = [Step(i, B, 8, 100, new_shape=False) for i in range(1, 10)]
    s = stats.summarize(steps)
    assert s.n_new == 0 and s.n_seen == 9


def test_summary_fields_and_json():
    steps = [Step(i, 4 * B if i == 40 else B, 8, 100, rank=r) for i in range(1, 51) for r in (0, 1)]
    s = stats.summarize(steps, slow_factor=2)
    assert s.slow_factor == 2 and s.ranks == [0, 1] and s.total_seconds == 98 * B + 2 * 4 * B
    assert s.p95 == B and s.n_slow == 2
    ddp = [
        Step(1, B, 8, 100, 0),
        Step(1, B, 8, 100, 1),
        *(Step(i, B, 8, 100, r) for i in range(2, 40) for r in (0, 1)),
        Step(40, 8 * B, 8, 100, 0),  # waits for rank 1's new shape at step 40
        Step(40, 8 * B, 8, 104, 1),
    ]
    s = stats.summarize(ddp)
    waiting = next(st for st in s.slow_steps if st.rank == 0)
    assert s.waits_of(waiting) == 1 and s.waits_of(Step(3, B)) is None
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert d["waits"] == [{"rank": 0, "step": 40, "waits_for": 1}]
    assert d["slow_waiting"] == 1 and d["slow_share_on_new"] == 1


# --- the model ------------------------------------------------------------------------------------


def test_a_step_at_the_baseline_is_neither_a_data_stall_nor_a_ddp_wait():
    at = Step(5, B, 8, 100, new_shape=False, phases=(("data_load", 0.0), ("backward_time", B)))
    assert not detector.is_data_stall(at, B)
    assert detector.waits_for(at, B, (), use_signature=True) is None


def test_backward_only_shares_scale_with_the_extra_time():
    def waits(backward: float, forward: float) -> bool:
        step = Step(
            5,
            B + 2.0,
            8,
            100,
            new_shape=False,
            phases=(("forward_time", forward), ("backward_time", backward)),
        )
        return detector.waits_for(step, B, (), use_signature=True) is not None

    share = detector.DDP_BACKWARD_SHARE
    assert waits(share * 2.0, 0.0) and not waits(1.0, 0.0)  # 1.0 s of 2.0 s extra: not backward-only
    assert waits(share * 2.0, (1 - share) * 2.0)  # forward at the rest: still a wait
    assert not waits(share * 2.0, 0.5)


def test_waits_text():
    assert step_types.waits_text(step_types.ANY_RANK) == "waits for another rank's new shape (DDP all-reduce)"
    assert step_types.waits_text(1) == "waits for rank 1's new shape (DDP all-reduce)"


# --- the live detector -----------------------------------------------------------------------------


def test_detector_factor_message_and_warmup_floor():
    with pytest.raises(ValueError, match="factor must be > 1"):
        Detector(factor=0.5)
    for warmup in (0, 1):  # judged from the second step
        assert [e.step.index for e in events(Detector(warmup=warmup), [Step(1, B), Step(2, 10 * B)])] == [2]


def test_detector_has_no_baseline_before_warmup_steps():
    d = Detector()  # LIVE_WARMUP = 3
    for i in (1, 2):
        d.observe(Step(i, B))
        assert d.baseline(0) is None
    d.observe(Step(3, B))
    assert d.baseline(0) == B
    assert Detector().baseline(5) is None


def test_detector_ddp_wait_for_another_ranks_new_shape():
    d = Detector(warmup=1)
    for i in range(1, 6):
        for r in (0, 1):
            d.observe(Step(i, B, 8, 100, rank=r))
    # rank 1 meets a new shape at step 6; rank 0's seen-shape step 6 is slow (not backward-only).
    assert d.observe(Step(6, B, 8, 104, rank=1))[0] is True
    new, e = d.observe(Step(6, 8 * B, 8, 100, rank=0, phases=(("forward_time", 7 * B),)))
    assert new is False and e.waits == 1 and e.cause == NEW_SHAPE
    # A rank that only saw a known shape at that index is nothing to wait for.
    d.observe(Step(7, B, 8, 100, rank=1))
    _, e = d.observe(Step(7, 8 * B, 8, 100, rank=0, phases=(("forward_time", 7 * B),)))
    assert e.waits is None and e.cause == SEEN_SHAPE
    # One rank in sight: the backward-only signature.
    _, e = d.observe(Step(8, 8 * B, 8, 100, rank=0, phases=(("backward_time", 7 * B),)))
    assert e.waits == step_types.ANY_RANK and e.cause == NEW_SHAPE


def test_detector_keeps_the_last_window_indices_of_new_shapes():
    d = Detector(warmup=1, window=4)
    for i in range(101, 106):
        d.observe(Step(i, B, 8, 100))
    for i in range(1, 5):  # rank 1: new shapes at 4 indices (the window), after rank 0's at 101
        d.observe(Step(i, B, 8, 100 + 4 * i, rank=1))
    for i in (1, 4):
        _, e = d.observe(Step(i, 8 * B, 8, 100, phases=(("forward_time", 7 * B),)))
        assert e.waits == 1, i


def test_detector_takes_given_new_shape_flags_and_reads_no_half_shape():
    d = Detector()
    assert d.observe(Step(1, B, 8, 100, new_shape=False))[0] is False
    assert d.classify(0, B, None, 104) == (None, None, 0, 0)
    assert d.classify(0, B, 8, None) == (None, None, 0, 0)
    assert d.classify(0, B, 8, 108) == (True, None, 0, 0)


def test_detector_counts_back_earlier_steps_at_the_factor():
    d = Detector()
    run = [
        Step(1, B, 8, 100),
        Step(2, 3 * B, 8, 100),
        Step(3, B, 8, 100),
        Step(4, B, 8, 100),
        Step(5, 10 * B, 8, 100),
    ]
    found = events(d, run)
    assert [e.step.index for e in found] == [5] and found[0].earlier_slow == 1
    e = d.event(Step(9, 10 * B, 8, 100, new_shape=False), B)
    assert e.earlier_slow == 0 and e.earlier_slow_new == 0


@pytest.mark.parametrize("before, counted", [(8, 1), (9, 0), (10, 0)])
def test_detector_counts_back_over_at_most_4_windows_of_steps(before, counted):
    d = Detector(warmup=1, window=2)
    run = [Step(1, 10 * B, 8, 100)] + [Step(i, B, 8, 100) for i in range(2, before + 1)]
    assert events(d, run) == []
    _, e = d.observe(Step(before + 1, 10 * B, 8, 100))
    assert e.earlier_slow == counted


@pytest.mark.parametrize("window, values, median", [(3, (1, 2, 3, 4), 3), (5, (1, 2, 3, 4, 5), 3)])
def test_detector_running_median_over_its_window(window, values, median):
    d = Detector(factor=100, warmup=1, window=window, min_seen=1)
    d.observe(Step(0, B, 8, 100))  # new shape
    for i, v in enumerate(values, start=1):
        d.observe(Step(i, v * B, 8, 100))
    assert d.baseline(0) == median * B
