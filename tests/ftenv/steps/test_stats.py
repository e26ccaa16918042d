"""ftenv.steps.stats: shapes, summary, verdict thresholds (each shown to FAIL on what it guards
against and to PASS without it), and the live Detector."""

from __future__ import annotations

import json
import math
import random

import pytest

from ftenv import variables
from ftenv.attention import sdpa
from ftenv.outcome import FAIL, INCONCLUSIVE, PASS
from ftenv.steps import detector, fixes, stats, thresholds
from ftenv.steps import step as step_types
from ftenv.steps.detector import Detector
from ftenv.steps.step import DATA, NEW_SHAPE, SEEN_SHAPE, Step
from ftenv.steps.thresholds import Thresholds
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
    from ftenv.selfcheck.base import Measured
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
    assert detector.waits_for(step, B, (), use_signature=False) is None or not waits


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
