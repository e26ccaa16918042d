"""ftenv.watchdog.stats: shapes, summary, verdict thresholds (each shown to FAIL on what it guards
against and to PASS without it), and the live Detector. The last section holds
the edges a mutation run found unchecked; times there are binary fractions so ratios are exact."""

from __future__ import annotations

import json
import math
import random

import pytest

from ftenv import variables
from ftenv.attention import sdpa
from ftenv.outcome import FAIL, INCONCLUSIVE, PASS
from ftenv.watchdog import detector, fixes, stats, thresholds
from ftenv.watchdog import step as step_types
from ftenv.watchdog.detector import Detector
from ftenv.watchdog.step import DATA, NEW_SHAPE, SEEN_SHAPE, Step
from ftenv.watchdog.thresholds import Thresholds
from support.steplogs import FAST, SHAPES, SLOW, STEPS, ddp_run, field_report_run, fixed_run


def as_steps(gen, rank=None) -> list[Step]:
    return [
        Step(
            s.index,
            s.seconds,
            s.batch,
            s.padded,
            s.rank if rank is None else rank,
            phases=(("data_load", s.data_load), ("forward_time", s.forward)),
        )
        for s in gen
    ]


def steady(n=200, seconds=0.1, jitter=0.05, seed=3, shapes=20) -> list[Step]:
    """n steps at `seconds` +-jitter over a few repeating shapes (first occurrences spread)."""
    rng = random.Random(seed)
    return [
        Step(i, seconds * (1 + rng.uniform(-jitter, jitter)), 8, 100 + 4 * rng.randrange(shapes))
        for i in range(1, n + 1)
    ]


def test_mark_new_shapes_is_per_rank_and_leaves_shapeless_steps_unknown():
    steps = [
        Step(1, 0.1, 8, 100, rank=0),
        Step(2, 0.1, 8, 100, rank=0),
        Step(1, 0.1, 8, 100, rank=1),
        Step(3, 0.1, None, None, rank=0),
        Step(4, 0.1, 8, 104, rank=0),
    ]
    assert [s.new_shape for s in step_types.mark_new_shapes(steps)] == [True, False, True, None, True]
    assert steps[0].shape == (8, 100) and steps[3].shape is None


def test_issue_3704_pattern_fails_with_its_numbers():
    steps = as_steps(field_report_run())
    s = stats.summarize(steps)
    assert s.n_steps == STEPS == 382
    assert s.n_slow == 59 == SHAPES and s.slow_on_new == 59
    assert all(st.new_shape for st in s.slow_steps)
    assert s.mean == pytest.approx(0.245, abs=0.002)
    assert round(s.mean_without_slow, 2) == 0.10 and s.mean_without_slow == pytest.approx(FAST, abs=0.002)
    assert s.median == pytest.approx(FAST, abs=0.002)
    assert s.new_over_seen == pytest.approx(SLOW / FAST, rel=0.03)
    assert s.time_lost == pytest.approx(59 * (SLOW - FAST), rel=0.02)
    assert s.verdict == FAIL
    assert "TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in s.fix
    assert s.slow_causes == {NEW_SHAPE: 59}


def test_fixed_run_passes_and_flags_nothing():
    s = stats.summarize(as_steps(fixed_run()))
    assert s.verdict == PASS, s.reasons
    assert s.n_slow == 0 and s.fix is None
    assert s.mean == pytest.approx(0.100, abs=0.002)
    assert s.p95_over_median < 1.1 and s.max_over_median < 1.2


def test_new_over_seen_alone_fails_and_passes_without_it():
    base = steady(shapes=8)
    # Injected: each shape's first step takes 3.5x; few enough (8 of 200) that p95 and max pass.
    marked = step_types.mark_new_shapes(base)
    slow = [
        Step(s.index, s.seconds * 3.5 if s.new_shape else s.seconds, s.batch, s.padded_len) for s in marked
    ]
    bad, good = stats.summarize(slow), stats.summarize(base)
    assert bad.new_over_seen >= 3 > good.new_over_seen
    assert bad.p95_over_median < 2 and bad.max_over_median < 10 and bad.n_new == 8
    assert bad.verdict == FAIL and good.verdict == PASS
    assert bad.fix and "TORCH_CUDNN_SDPA_DEPRIORITIZED=1" in bad.fix


def test_p95_alone_fails_and_passes_without_it():
    base = steady(shapes=3)  # shapes all seen early: slow steps below land on seen shapes
    rng = random.Random(9)
    slow = [
        Step(s.index, s.seconds * 2.5 if rng.random() < 0.1 and s.index > 10 else s.seconds, 8, s.padded_len)
        for s in base
    ]
    bad, good = stats.summarize(slow), stats.summarize(base)
    assert bad.p95_over_median >= 2 > good.p95_over_median
    assert bad.new_over_seen < 3 and bad.max_over_median < 10
    assert bad.verdict == FAIL and good.verdict == PASS
    assert not bad.slow_on_new


def test_max_alone_fails_and_passes_without_it():
    base = steady(shapes=3)
    stall = [Step(s.index, 1.5 if s.index == 150 else s.seconds, s.batch, s.padded_len) for s in base]
    bad, good = stats.summarize(stall), stats.summarize(base)
    assert bad.max_over_median >= 10 > good.max_over_median
    assert bad.p95_over_median < 2 and bad.new_over_seen < 3
    assert bad.verdict == FAIL and good.verdict == PASS
    assert bad.slow_causes == {SEEN_SHAPE: 1}


def test_too_few_new_or_seen_steps_is_inconclusive_not_pass():
    no_shape = [Step(i, 0.1) for i in range(1, 50)]
    all_new = [Step(i, 0.1, 8, 100 + i) for i in range(1, 50)]
    assert stats.summarize(no_shape).verdict == INCONCLUSIVE
    assert stats.summarize(all_new).verdict == INCONCLUSIVE
    assert stats.summarize([]).verdict == INCONCLUSIVE
    # Even with the minimums at 0, no step on a seen shape means nothing to compare with.
    assert stats.summarize(all_new, Thresholds(min_new=1, min_seen=0)).verdict == INCONCLUSIVE


def test_warmup_leaves_out_the_first_steps_of_each_rank():
    steps = [Step(1, 5.0, 8, 100, rank=0), Step(1, 5.0, 8, 100, rank=1)] + [
        Step(i, 0.1, 8, 100, rank=r) for i in range(2, 40) for r in (0, 1)
    ]
    assert stats.summarize(steps).max_over_median == pytest.approx(50)
    s = stats.summarize(steps, Thresholds(warmup=1))
    assert s.n_warmup == 2 and s.max == pytest.approx(0.1)


def test_data_load_stalls_get_the_data_fix():
    steps = [
        Step(i, 0.6 if i % 10 == 0 else 0.1, 8, 100, phases=(("data_load", 0.52 if i % 10 == 0 else 0.01),))
        for i in range(1, 101)
    ]
    s = stats.summarize(steps)
    assert s.verdict == FAIL and s.slow_causes == {DATA: 10}
    assert "num_workers" in s.fix


def test_summary_to_dict_is_strict_json():
    for steps in ([], as_steps(field_report_run())):
        d = stats.summarize(steps).to_dict()
        json.dumps(d, allow_nan=False)
    d = stats.summarize(as_steps(field_report_run())).to_dict()
    assert d["n_slow"] == 59 and d["slow_steps"][0]["phases"]["data_load"] == pytest.approx(0.011)


def test_percentile_matches_linear_interpolation():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([5], 95) == 5
    assert stats.percentile(list(range(101)), 95) == 95


def test_detector_names_every_slow_step_of_the_issue_3704_pattern():
    d = Detector()
    events = [e for _, e in (d.observe(s) for s in as_steps(field_report_run())) if e]
    first = events[0]
    assert first.cause == NEW_SHAPE and first.ratio > 9
    # Everything slow is either flagged or counted back at the first flag: 59 in all, all new.
    assert len(events) + first.earlier_slow == 59 and first.earlier_slow_new == first.earlier_slow
    assert all(e.step.new_shape and e.cause == NEW_SHAPE for e in events)
    assert first.baseline == pytest.approx(FAST, abs=0.003)


def test_detector_is_silent_on_the_fixed_run_and_per_rank():
    d = Detector()
    steps = [
        s for pair in zip(as_steps(fixed_run(rank=0)), as_steps(fixed_run(rank=1)), strict=True) for s in pair
    ]
    assert not [e for _, e in (d.observe(s) for s in steps) if e]
    assert d.baseline(0) == pytest.approx(0.1, abs=0.005) and d.baseline(1) == pytest.approx(0.1, abs=0.005)


def test_detector_respects_factor_and_warmup():
    steps = [Step(i, 0.1, 8, 100) for i in range(1, 20)] + [Step(20, 0.25, 8, 100)]
    assert [e for _, e in map(Detector(factor=3).observe, steps) if e] == []
    hits = [e for _, e in map(Detector(factor=2).observe, steps) if e]
    assert [e.step.index for e in hits] == [20] and hits[0].cause == SEEN_SHAPE
    early = [Step(1, 0.1, 8, 100), Step(2, 0.1, 8, 100), Step(3, 0.1, 8, 100), Step(4, 0.9, 8, 100)]
    assert [e for _, e in map(Detector(warmup=5).observe, early) if e] == []
    assert [e.step.index for _, e in map(Detector(warmup=3).observe, early) if e] == [4]
    with pytest.raises(ValueError):
        Detector(factor=1)


# --- boundaries (at, just below, just above) of every threshold the verdicts use, and the
# --- mutants a review found. Times are binary fractions so that ratios are exact.

B = 0.125  # a step time whose multiples are exact in binary


def shape_run(new_s: float, n_new: int = 3, n_seen: int = 60) -> list[Step]:
    """n_new steps on new shapes taking new_s, then n_seen steps on those shapes taking B."""
    new = [Step(i, new_s, 8, 100 + 4 * i) for i in range(1, n_new + 1)]
    seen = [Step(n_new + i, B, 8, 100 + 4 * (1 + i % n_new)) for i in range(1, n_seen + 1)]
    return new + seen


@pytest.mark.parametrize("new_s, verdict", [(3 * B, FAIL), (3 * B - 1e-9, PASS), (3 * B + 1e-9, FAIL)])
def test_new_over_seen_boundary(new_s, verdict):
    s = stats.summarize(shape_run(new_s))
    assert s.p95_over_median < 2 and s.max_over_median < 10  # only the shape rule decides
    assert s.verdict == verdict, s.reasons


def p95_run(slow_s: float) -> list[Step]:
    """21 steps, 3 shapes all new in the first three, two seen-shape steps taking slow_s: with
    21 values the 95th percentile is exactly the 20th smallest."""
    return [Step(i, slow_s if i in (10, 15) else B, 8, 100 + 4 * (i % 3)) for i in range(1, 22)]


@pytest.mark.parametrize("slow_s, verdict", [(2 * B, FAIL), (2 * B - 1e-9, PASS), (2 * B + 1e-9, FAIL)])
def test_p95_boundary(slow_s, verdict):
    s = stats.summarize(p95_run(slow_s))
    assert s.new_over_seen == 1 and s.max_over_median < 10
    assert s.verdict == verdict, s.reasons


@pytest.mark.parametrize("stall, verdict", [(10 * B, FAIL), (10 * B - 1e-9, PASS), (10 * B + 1e-9, FAIL)])
def test_max_boundary(stall, verdict):
    steps = [Step(i, stall if i == 50 else B, 8, 100 + 4 * (i % 3)) for i in range(1, 101)]
    s = stats.summarize(steps)
    assert s.new_over_seen == 1 and s.p95_over_median < 2
    assert s.verdict == verdict, s.reasons


@pytest.mark.parametrize("n_new, verdict", [(2, INCONCLUSIVE), (3, PASS), (4, PASS)])
def test_min_new_boundary(n_new, verdict):
    assert Thresholds().min_new == 3
    assert stats.summarize(shape_run(B, n_new=n_new)).verdict == verdict


@pytest.mark.parametrize("n_seen, verdict", [(2, INCONCLUSIVE), (3, PASS), (4, PASS)])
def test_min_seen_boundary(n_seen, verdict):
    assert stats.summarize(shape_run(B, n_seen=n_seen)).verdict == verdict


@pytest.mark.parametrize("seconds, slow", [(3 * B, True), (3 * B - 1e-9, False), (3 * B + 1e-9, True)])
def test_slow_factor_boundary_in_the_summary(seconds, slow):
    assert thresholds.SLOW_FACTOR == 3.0
    steps = [Step(i, seconds if i == 30 else B, 8, 100) for i in range(1, 61)]
    assert stats.summarize(steps).n_slow == int(slow)


def test_baseline_is_the_seen_shape_median_not_all_steps():
    # More slow new-shape steps than seen ones: the median of all steps is a slow one.
    steps = [Step(i, 8 * B, 8, 100 + 4 * i) for i in range(1, 13)] + [
        Step(12 + i, B, 8, 104) for i in range(1, 11)
    ]
    s = stats.summarize(steps)
    assert s.median == 8 * B and s.baseline == B
    assert s.n_slow == 12 and s.slow_on_new == 12


@pytest.mark.parametrize("data, cause", [(0.5, DATA), (0.5 - 1e-9, SEEN_SHAPE), (0.75, DATA)])
def test_data_cause_boundary_is_half_the_extra_time(data, cause):
    step = Step(9, B + 1.0, 8, 100, new_shape=False, phases=(("data_load", data),))
    assert detector.cause_of(step, B) == cause


def test_data_fix_when_half_the_slow_steps_wait_for_data():
    def run(data_stalls: int) -> stats.Summary:
        steps = [Step(i, B, 8, 100) for i in range(1, 101)]
        slow = [Step(100 + i, 8 * B, 8, 100, phases=(("data_load", 7 * B),)) for i in range(data_stalls)]
        other = [Step(200 + i, 8 * B, 8, 100) for i in range(8 - data_stalls)]
        return stats.summarize(steps + slow + other)  # 8 slow steps of 108: p95 FAILs

    assert run(4).verdict == FAIL and run(4).fix == fixes.DATA_FIX  # 4 of 8: at the share
    assert run(3).verdict == FAIL and run(3).fix is None  # below
    assert run(5).fix == fixes.DATA_FIX


@pytest.mark.parametrize("seconds, flagged", [(3 * B, True), (3 * B - 1e-9, False), (3 * B + 1e-9, True)])
def test_detector_boundary_is_at_least_factor_times_the_baseline(seconds, flagged):
    d = Detector()
    for i in range(1, 11):
        assert d.observe(Step(i, B, 8, 100))[1] is None
    assert (d.observe(Step(11, seconds, 8, 100))[1] is not None) is flagged


@pytest.mark.parametrize("judged, steps", [(False, 3), (True, 4)])
def test_detector_warmup_default_judges_from_the_fourth_step(judged, steps):
    d = Detector()  # LIVE_WARMUP = 3
    run = [Step(i, B, None, None) for i in range(1, steps)] + [Step(steps, 10 * B, None, None)]
    events = [e for _, e in map(d.observe, run) if e]
    assert bool(events) is judged


def test_detector_running_median_averages_the_two_middle_values():
    d = Detector(warmup=1)
    d.observe(Step(1, B, 8, 100))  # new shape
    for i, sec in enumerate((B, 2 * B, 3 * B, 4 * B), start=2):
        d.observe(Step(i, sec, 8, 100))
    assert d.baseline(0) == pytest.approx(2.5 * B)


def test_percentile_of_one_value_and_of_none():
    assert stats.percentile([0.5], 95) == 0.5
    assert math.isnan(stats.percentile([], 95))


# --- the fix follows what is known of the variable ----------------------------------------------


def test_shape_fix_when_the_variable_is_already_1_does_not_say_set_it():
    steps = as_steps(field_report_run())
    one = stats.summarize(steps, deprioritized=sdpa.interpret_deprioritized("1")).fix
    assert not one.startswith("set") and "already set" in one and "ftenv probe" in one and "phases" in one
    zero = stats.summarize(steps, deprioritized=sdpa.interpret_deprioritized("0")).fix
    assert zero.startswith("set TORCH_CUDNN_SDPA_DEPRIORITIZED=1")
    assert stats.summarize(steps).fix == fixes.SHAPE_FIX


def test_the_selfcheck_uses_that_wording():
    from ftenv.selfcheck.measured import Measured
    from ftenv.selfcheck.verdict import verdict_of

    steps = as_steps(field_report_run())
    r = verdict_of(
        Measured(
            "in-process", steps, Thresholds(), extra={"environment": {variables.SDPA_DEPRIORITIZED: "1"}}
        )
    )
    assert r["verdict"] == FAIL and r["summary"]["fix"] == sdpa.already_deprioritized_text()


# --- DDP: a seen-shape step that waits for another rank's new shape ------------------------------


def ddp_steps(only_rank=None) -> list[Step]:
    runs = ddp_run()
    keep = range(len(runs)) if only_rank is None else [only_rank]
    return [
        Step(
            g.index,
            g.seconds,
            g.batch,
            g.padded,
            g.rank,
            phases=(("data_load", g.data_load), ("forward_time", g.forward), ("backward_time", g.backward)),
        )
        for r in keep
        for g in runs[r]
    ]


def test_ddp_waits_line_up_with_the_other_ranks_new_shape():
    s = stats.summarize(ddp_steps())
    assert s.n_slow == 72 and s.slow_on_new == 40 and s.slow_waiting == 32
    assert s.slow_causes == {NEW_SHAPE: 72} and s.slow_share_on_new == 1
    marked = {(st.rank, st.index): st.new_shape for st in step_types.mark_new_shapes(ddp_steps())}
    for (rank, index), other in s.waits.items():
        assert marked[(rank, index)] is False and other == 1 - rank and marked[(other, index)] is True
    assert any("waiting for another rank's new shape" in r for r in s.reasons)


def test_ddp_wait_on_one_logged_rank_by_the_backward_only_signature():
    s = stats.summarize(ddp_steps(only_rank=0))
    assert s.slow_waiting == 16 and set(s.waits.values()) == {step_types.ANY_RANK}
    assert s.slow_causes == {NEW_SHAPE: s.n_slow}


@pytest.mark.parametrize("backward, waits", [(0.8, True), (0.8 - 1e-9, False), (0.9, True)])
def test_ddp_backward_share_boundary(backward, waits):
    step = Step(5, B + 1.0, 8, 100, new_shape=False, phases=(("backward_time", backward),))
    assert (detector.waits_for(step, B, (), use_signature=True) is not None) is waits
    assert detector.waits_for(step, B, (), use_signature=False) is None  # without the signature: never


@pytest.mark.parametrize("n_seen, baseline", [(1, 2 * B), (2, B)])
def test_detector_uses_the_seen_median_from_live_min_seen_steps(n_seen, baseline):
    # Three slowish first steps on new shapes, then n_seen steps on a seen shape.
    d = Detector(warmup=1)
    for i in range(1, 4):
        d.observe(Step(i, 2 * B, 8, 100 + 4 * i))
    for i in range(n_seen):
        d.observe(Step(10 + i, B, 8, 104))
    assert d.baseline(0) == baseline  # LIVE_MIN_SEEN = 2: below it, the median of all steps


def test_a_stall_in_forward_too_is_not_a_ddp_wait():
    phases = (("forward_time", 0.3), ("backward_time", 0.9))
    step = Step(5, B + 1.0, 8, 100, new_shape=False, phases=phases)
    assert detector.waits_for(step, B, (), use_signature=True) is None
    calm = Step(5, B + 1.0, 8, 100, new_shape=False, phases=(("forward_time", 0.1), ("backward_time", 0.9)))
    assert detector.waits_for(calm, B, (), use_signature=True) == step_types.ANY_RANK


# --- the edges a mutation run found unchecked (docs/testing.md) --------------------------------------

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


# --- Summary.to_dict: the JSON `ftenv analyze --json` and the watchdog summaries carry -----------


def test_summary_to_dict_of_no_steps_is_every_key_with_unknowns_as_none():
    assert stats.summarize([]).to_dict() == {
        "n_steps": 0,
        "median": None,
        "p95": None,
        "max": None,
        "mean": None,
        "new_median": None,
        "seen_median": None,
        "new_over_seen": None,
        "p95_over_median": None,
        "max_over_median": None,
        "slow_steps": [],
        "slow_on_new": 0,
        "time_lost": 0,
        "mean_without_slow": None,
        "verdict": INCONCLUSIVE,
        "reasons": ["no training steps"],
        "fix": None,
        "n_new": 0,
        "n_seen": 0,
        "n_warmup": 0,
        "baseline": None,
        "slow_factor": thresholds.SLOW_FACTOR,
        "slow_causes": {},
        "ranks": [],
        "total_seconds": 0,
        "waits": [],
        "apart_steps": [],
        "pauses": [],
        "pause_seconds": 0.0,
        "failed_rules": [],
        "passed_rules": [],
        "context": ["no training steps"],
        "notes": [],
        "fix_short": None,
        "n_slow": 0,
        "n_apart": 0,
        "slow_share_on_new": None,
        "slow_waiting": 0,
    }


def pause_run(stall: float) -> list[Step]:
    """One rank: a start-up step set apart, then 21 judged steps on 3 shapes (new at steps 2-4),
    step 12 (a seen shape) taking `stall`; a validation and checkpoint pause before step 7 (shown)
    and a short unlogged one before step 15 (counted, not shown). With 21 values the 95th
    percentile is exactly the 20th smallest."""
    steps = [Step(1, 2 * B, apart=step_types.RUN_START)]
    for i in range(2, 23):
        pause, before = None, ()
        if i == 7:
            pause, before = 3.0, (step_types.VALIDATION, step_types.CHECKPOINT)
        elif i == 15:
            pause = 2 * B
        steps.append(Step(i, stall if i == 12 else B, 8, 100 + 4 * (i % 3), pause=pause, before=before))
    return steps


def test_summary_to_dict_of_a_run_with_a_slow_step_a_pause_and_a_start_up_step():
    s = stats.summarize(pause_run(4 * B))
    slow = s.slow_steps[0]
    assert slow.index == 12 and slow.new_shape is False
    shape_line = (
        "steps on shapes new to their rank take 1.0x the steps on shapes already seen "
        "(median 0.125 s vs 0.125 s; FAIL at 3x)"
    )
    p95_line = "p95 step time is 1.0x the median (FAIL at 2x)"
    max_line = "slowest step is 4.0x the median (FAIL at 10x)"
    note = (
        "1 slow steps (>= 3x the baseline 0.125 s), 0 of them on new shapes; 0.4 s lost; "
        "mean step 0.143 s, 0.125 s without them"
    )
    assert s.to_dict() == {
        "n_steps": 21,
        "median": B,
        "p95": B,
        "max": 4 * B,
        "mean": 24 * B / 21,
        "new_median": B,
        "seen_median": B,
        "new_over_seen": 1.0,
        "p95_over_median": 1.0,
        "max_over_median": 4.0,
        "slow_steps": [
            {
                "index": 12,
                "seconds": 4 * B,
                "batch": 8,
                "padded_len": 100,
                "rank": 0,
                "new_shape": False,
                "phases": {},
                "step_in_epoch": None,
                "pause": None,
                "before": (),
                "apart": None,
            }
        ],
        "slow_on_new": 0,
        "time_lost": 3 * B,
        "mean_without_slow": B,
        "verdict": PASS,
        "reasons": [shape_line, p95_line, max_line, note],
        "fix": None,
        "n_new": 3,
        "n_seen": 18,
        "n_warmup": 0,
        "baseline": B,
        "slow_factor": 3.0,
        "slow_causes": {SEEN_SHAPE: 1},
        "ranks": [0],
        "total_seconds": 24 * B,
        "waits": [],
        "apart_steps": [
            {
                "index": 1,
                "seconds": 2 * B,
                "batch": None,
                "padded_len": None,
                "rank": 0,
                "new_shape": None,
                "phases": {},
                "step_in_epoch": None,
                "pause": None,
                "before": (),
                "apart": step_types.RUN_START,
            }
        ],
        "pauses": [
            {
                "rank": 0,
                "after_step": 6,
                "seconds": 3.0,
                "before": [step_types.VALIDATION, step_types.CHECKPOINT],
            }
        ],
        "pause_seconds": 3.0 + 2 * B,
        "failed_rules": [],
        "passed_rules": [shape_line, p95_line, max_line],
        "context": [],
        "notes": [note],
        "fix_short": None,
        "n_slow": 1,
        "n_apart": 1,
        "slow_share_on_new": 0.0,
        "slow_waiting": 0,
    }


# --- the rules: their order, texts and PASSED marks ------------------------------------------------


def test_under_a_fail_the_failed_rule_comes_first_and_the_held_ones_are_marked_passed():
    s = stats.summarize(pause_run(11 * B))  # only the slowest step fails
    shape_line = (
        "steps on shapes new to their rank take 1.0x the steps on shapes already seen "
        "(median 0.125 s vs 0.125 s; FAIL at 3x)"
    )
    p95_line = "p95 step time is 1.0x the median (FAIL at 2x)"
    max_line = "slowest step is 11.0x the median (FAIL at 10x)"
    assert s.verdict == FAIL and s.failed_rules == [max_line] and s.passed_rules == [shape_line, p95_line]
    assert s.context == [] and len(s.notes) == 1 and s.notes[0].startswith("1 slow steps (>= 3x")
    assert s.reasons == [max_line, stats.PASSED + shape_line, stats.PASSED + p95_line, *s.notes]
    assert stats.PASSED == "passed: "
    assert s.fix is None and s.fix_short is None  # a seen-shape stall: no fix known


def test_the_failed_rules_keep_the_order_shape_p95_max_and_the_shape_fix_comes_short_and_full():
    # 3 steps on new shapes at 32x, 18 on seen ones: all three rules fail.
    steps = [Step(i, 32 * B, 8, 100 + 4 * i) for i in range(1, 4)]
    steps += [Step(3 + i, B, 8, 100 + 4 * (1 + i % 3)) for i in range(1, 19)]
    s = stats.summarize(steps)
    assert s.failed_rules == [
        "steps on shapes new to their rank take 32.0x the steps on shapes already seen "
        "(median 4.000 s vs 0.125 s; FAIL at 3x)",
        "p95 step time is 32.0x the median (FAIL at 2x)",
        "slowest step is 32.0x the median (FAIL at 10x)",
    ]
    assert s.passed_rules == [] and s.reasons == [*s.failed_rules, *s.notes]
    assert s.verdict == FAIL
    assert (s.fix_short, s.fix) == (fixes.shape_fix().short, fixes.shape_fix().full)


def test_without_a_fail_the_context_comes_first_and_nothing_is_marked():
    # Two steps on new shapes only: the shape rule cannot be applied, the other two hold.
    s = stats.summarize([Step(i, B, 8, 100 + 4 * (i % 2)) for i in range(1, 11)])
    context = (
        "too few steps to compare new and seen shapes (2 on new shapes, 8 on seen shapes; at least 3 "
        "and 3 needed)"
    )
    assert s.verdict == INCONCLUSIVE and s.failed_rules == [] and s.context == [context]
    assert s.reasons == [
        context,
        "p95 step time is 1.0x the median (FAIL at 2x)",
        "slowest step is 1.0x the median (FAIL at 10x)",
    ]


def test_a_fail_with_context_lists_failed_passed_context_then_notes():
    # Two new shapes (too few to compare), a stall at 16x on a seen shape.
    s = stats.summarize([Step(i, 16 * B if i == 8 else B, 8, 100 + 4 * (i % 2)) for i in range(1, 31)])
    assert s.verdict == FAIL and len(s.context) == 1 and len(s.notes) == 1
    assert s.reasons == [
        "slowest step is 16.0x the median (FAIL at 10x)",
        stats.PASSED + "p95 step time is 1.0x the median (FAIL at 2x)",
        *s.context,
        *s.notes,
    ]


# --- summarize's arguments reach the summary -------------------------------------------------------


def test_the_slow_factor_also_decides_which_unlogged_pauses_are_shown():
    shown = (0, 6, 3.0, (step_types.VALIDATION, step_types.CHECKPOINT))  # logged: always shown
    default = stats.summarize(pause_run(B))
    assert default.pauses == [shown] and default.pause_seconds == 3.0 + 2 * B
    lower = stats.summarize(pause_run(B), slow_factor=2)  # the 2x pause before step 15 now counts
    assert lower.pauses == [shown, (0, 14, 2 * B, ())] and lower.pause_seconds == 3.0 + 2 * B


@pytest.mark.parametrize(
    "compiled, cudnn_first, full",
    [
        (None, False, fixes.REPEAT_SHAPES_FIX),  # cuDNN attention not first: pad
        (("decoder",), False, fixes.RECOMPILE_FIX),  # and compiled: the recompiles
        (("decoder",), None, fixes.SHAPE_FIX),  # compiled, nothing else known: set the variable
        (None, True, fixes.SHAPE_FIX),
    ],
)
def test_compiled_and_cudnn_first_pick_the_shape_fix(compiled, cudnn_first, full):
    s = stats.summarize(as_steps(field_report_run()), compiled=compiled, cudnn_first=cudnn_first)
    assert s.verdict == FAIL and s.fix == full
    assert s.fix_short == fixes.shape_fix(None, compiled, cudnn_first).short


def test_compiled_reaches_the_fix_when_the_variable_is_already_1():
    one = sdpa.interpret_deprioritized("1")
    s = stats.summarize(as_steps(field_report_run()), deprioritized=one, compiled=("decoder",))
    assert s.fix == f"{sdpa.already_deprioritized_text()}; with compile on: {fixes.RECOMPILE_FIX}"
    assert "torch.compile" in s.fix_short
