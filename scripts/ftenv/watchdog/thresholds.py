"""Every threshold and default the step verdicts use, in one place, set against the public figures
of FunASR issue #3704 (on one B200, steps on new shapes took about 10x the others).
"""

from __future__ import annotations

from dataclasses import dataclass

from ftenv import variables

#: A step is slow when it takes at least this many times the baseline (watch, analyze, timer).
SLOW_FACTOR = 3.0
#: Live detection: steps per rank before any is judged, slow steps of one cause printed before
#: the pattern line, the running-median window, and the seen-shape steps the baseline needs.
LIVE_WARMUP = 3
REPEAT = 3
WINDOW = 200
LIVE_MIN_SEEN = 2
#: A slow step is put down to data loading when data_load holds at least this share of its
#: extra time; the verdict's fix is the data fix when at least this share of slow steps are.
DATA_SHARE = 0.5
#: DDP: a slow step on a seen shape whose extra time is at least this share in backward_time
#: waits in the gradient all-reduce (for another rank's new shape).
DDP_BACKWARD_SHARE = 0.8
#: The silence alarm (ftenv.watchdog.silence; settings FTENV_WATCH_SILENCE_FACTOR, _MIN_S,
#: FTENV_WATCH_HANG_LIMIT_S): the alarm comes after SILENCE_FACTOR x the longest gap between two
#: trainer lines the run has shown (a step, a validation round, a checkpoint save, an epoch's
#: start), and never before SILENCE_MIN_S; after HANG_LIMIT_S without a line (and never before the
#: alarm) the watchdog stops the command and exits HUNG, HANG_KILL_AFTER_S after its SIGTERM
#: with SIGKILL (not torchrun's grace for its workers, variables.STOP_GRACE_S).
SILENCE_FACTOR = float(variables.default(variables.WATCH_SILENCE_FACTOR))
SILENCE_MIN_S = float(variables.default(variables.WATCH_SILENCE_MIN_S))
HANG_LIMIT_S = float(variables.default(variables.WATCH_HANG_LIMIT_S))
HANG_KILL_AFTER_S = 30.0


@dataclass(frozen=True)
class Thresholds:
    """When a run FAILs. Defaults suit a GPU fine-tuning run: the pattern of FunASR issue #3704
    (new-shape steps about 10x the others, one step in six slow) fails on the first two; steady
    0.1 s steps with 5% jitter are far below all three."""

    #: FAIL when median(new-shape steps) / median(seen-shape steps) >= this.
    new_over_seen: float = 3.0
    #: FAIL when the 95th percentile step time / median >= this (more than 5% of steps slow).
    p95_over_median: float = 2.0
    #: FAIL when the slowest step / median >= this (a single huge stall).
    max_over_median: float = 10.0
    #: Steps per rank left out of everything (0: the public figures count every step).
    warmup: int = 0
    #: Fewer steps than this on new (or seen) shapes: the shape comparison is INCONCLUSIVE.
    min_new: int = 3
    min_seen: int = 3


#: The self-check: steps at the start left out of its statistics (the first step pays one-time
#: costs, allocator, kernel loading, autograd set-up, a first compile, that have nothing to do with
#: shapes), and its thresholds per device kind. GPU: the pattern of FunASR issue #3704 (new-shape
#: steps 10x) fails by far; a healthy run measures about 1x. CPU: the same shape rule, looser tails,
#: because a shared CPU is noisy and the check there shows that the machinery works rather than
#: measuring a GPU stall.
SELFCHECK_WARMUP = 3
SELFCHECK = {
    "cuda": Thresholds(new_over_seen=2.0, p95_over_median=2.0, max_over_median=10.0, warmup=SELFCHECK_WARMUP),
    "cpu": Thresholds(new_over_seen=2.0, p95_over_median=4.0, max_over_median=20.0, warmup=SELFCHECK_WARMUP),
}
