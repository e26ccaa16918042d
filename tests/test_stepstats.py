"""ftenv.steps.stats: shapes, summary, verdict thresholds (each shown to FAIL on what it guards
against and to PASS without it), and the live Detector."""

from __future__ import annotations

import json
import random

import pytest

from ftenv.steps import stats
from ftenv.steps.stats import (
    DATA,
    FAIL,
    INCONCLUSIVE,
    NEW_SHAPE,
    PASS,
    SEEN_SHAPE,
    Detector,
    Step,
    Thresholds,
)
from steplogs import FAST, SHAPES, SLOW, STEPS, field_report_run, fixed_run


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
    assert [s.new_shape for s in stats.mark_new_shapes(steps)] == [True, False, True, None, True]
    assert steps[0].shape == (8, 100) and steps[3].shape is None


def test_field_report_pattern_fails_with_the_reports_numbers():
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
    marked = stats.mark_new_shapes(base)
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


def test_detector_names_every_slow_step_of_the_field_report():
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
