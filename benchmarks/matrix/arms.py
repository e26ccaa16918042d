"""The matrix's arms in the order they run, and the pure rules over them: each arm's gate (does its
own estimate fit in what is left of the budget) and the ranking (the fastest steady step among the
compiled arms with eager's losses). The tests call these without a model."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ftenv.trainer.compile_setting import DEFAULT_PARTS


@dataclass(frozen=True)
class Arm:
    """One arm of the matrix. `cache_of`: the arm whose compile caches it starts on (its compiled
    regions are the same); `profile_of`: a profiler pass over that arm ("best": the best so far);
    `fresh_process`: run in a new Python process (a real second run of a job)."""

    name: str
    parts: tuple[str, ...] = ()
    buckets: str | None = None
    fused: bool = False
    log_interval: int = 1
    cache_of: str | None = None
    profile_of: str | None = None
    fresh_process: bool = False


#: The combination expected fastest, what `--compile` turns on: every lever that changes no compiled
#: region's graph rides on the regional decoder and the compiled audio side.
BEST_GUESS = DEFAULT_PARTS
#: Few large regions: the decoder stack whole and the audio side whole (two compiled regions a
#: step, two CUDA-graph replays forward with `cudagraphs`, against 99 per-layer and per-block ones).
LARGE = ("decoder", "audiowhole", "nosync", "lmhead")
#: Finer buckets than `--buckets 64`: lengths to multiples of 32, five batch sizes.
FINE_BUCKETS = "32:8,12,16,24,32"
#: In order: the unknowns first (the floor, the candidate best arms, the warm start), then
#: upstream's path (its ratio is published), then the rest as the budget allows.
ARMS = [
    Arm("eager"),
    Arm("floor-eager", profile_of="eager"),
    Arm("best-guess", BEST_GUESS),
    Arm("regional+audio+nosync", ("regional", "audio", "nosync"), cache_of="best-guess"),
    Arm("regional+audio", ("regional", "audio"), cache_of="best-guess"),
    Arm("floor-best", profile_of="best"),
    Arm("warm", BEST_GUESS, cache_of="best-guess", fresh_process=True),
    Arm("large+buckets+graphs", (*LARGE, "cudagraphs"), buckets=FINE_BUCKETS),
    Arm("large", LARGE),
    Arm("+buckets", BEST_GUESS, buckets=FINE_BUCKETS, cache_of="best-guess"),
    Arm("decoder", ("decoder",)),
    Arm("decoder+nosync+lmhead", ("decoder", "nosync", "lmhead"), cache_of="decoder"),
    Arm("regional", ("regional", "nosync", "lmhead"), cache_of="best-guess"),
    Arm("+buckets+graphs", (*BEST_GUESS, "cudagraphs"), buckets=FINE_BUCKETS),
    Arm("+fused-adamw", BEST_GUESS, fused=True, cache_of="best-guess"),
    Arm("+log_interval=50", BEST_GUESS, log_interval=50, cache_of="best-guess"),
    Arm("+audiocache", (*BEST_GUESS, "audiocache"), cache_of="best-guess"),
]
#: Cold compile priors per part, seconds on one GPU (the decoder whole: FunASR PR #3705 reports
#: about 2.5 min cold; the regional parts trace one layer or block). Used until an arm with the
#: same parts has measured its own.
COLD_COMPILE_PRIOR_S = {
    "decoder": 150.0,
    "regional": 40.0,
    "audio": 40.0,
    "audiowhole": 60.0,
    "cudagraphs": 60.0,
}
#: A start on another arm's caches: Dynamo traces again, Inductor and Triton load from disk.
WARM_COMPILE_PRIOR_S = 20.0
#: Before eager has measured a step (never: eager runs first), a step is taken to cost this.
STEP_PRIOR_S = 1.0
#: A profiled step runs slower than a plain one (the profiler records every launch), and so does a
#: counted one (benchmarks.matrix.stepcount: Python sees every ATen op).
PROFILER_SLOWDOWN = 3.0
COUNT_SLOWDOWN = 3.0
#: Steps of a profiler pass and of the fresh-process warm start.
PROFILE_STEPS = 5
WARM_STEPS = 8
#: An arm starts only when its estimate times this fits in what is left (a first step cannot be
#: cut short, and an arm killed mid-compile leaves nothing).
START_SAFETY = 1.25
#: The validation pass: this many batches, after this fraction of the training steps.
VALIDATION_BATCHES = 3
VALIDATE_AFTER = 0.5


def measured(done: dict, name: str | None) -> dict | None:
    """The arm's result when it trained (it has a steady step)."""
    r = done.get(name) if name else None
    return r if r and "steady_step_s" in r else None


def compile_estimate(arm: Arm, done: dict) -> float:
    """Seconds the arm's first step will spend compiling: measured on an arm with the same parts
    (cold) or on any warm start, else the priors."""
    if not arm.parts and arm.profile_of is None:
        return 0.0
    if arm.profile_of is not None or (arm.cache_of and measured(done, arm.cache_of)):
        warm = [
            r["compile_s"] for r in done.values() if r.get("warm_start") and r.get("compile_s") is not None
        ]
        return max(warm) if warm else WARM_COMPILE_PRIOR_S
    same = [r["compile_s"] for r in done.values() if r.get("parts") == list(arm.parts) and "compile_s" in r]
    if same:
        return max(same)
    return sum(COLD_COMPILE_PRIOR_S.get(p, 0.0) for p in arm.parts)


def estimate_s(arm: Arm, done: dict, steps: int, start_s: float = 0.0) -> float:
    """The arm's own estimate: its compile, its steps at the steady step measured (of the arm it
    profiles or starts from, else eager's), and a fresh process's start; a floor arm's two passes."""
    source = measured(done, arm.profile_of if arm.profile_of != "best" else best_name(done))
    source = source or measured(done, arm.cache_of) or measured(done, "eager")
    step = source["steady_step_s"] if source else STEP_PRIOR_S
    if arm.profile_of:  # the profiler's pass, then the count's: each traces the regions again
        passes = PROFILER_SLOWDOWN + COUNT_SLOWDOWN
        return 2 * compile_estimate(arm, done) + (PROFILE_STEPS + 1) * step * passes
    n = WARM_STEPS if arm.fresh_process else steps
    return compile_estimate(arm, done) + n * step + (start_s if arm.fresh_process else 0.0)


def refusal(arm: Arm, done: dict, steps: int, left_s: float, start_s: float = 0.0) -> str | None:
    """Why the arm does not start with `left_s` seconds left (None: it starts)."""
    if arm.name == "eager":
        return None
    need = estimate_s(arm, done, steps, start_s) * START_SAFETY
    if need > left_s:
        return f"not run: needs about {need:.0f} s, {max(left_s, 0):.0f} s of the budget left"
    return None


def ranked(done: dict) -> list[dict]:
    """Compiled training arms whose losses stay within the GPU tolerance of eager's, fastest
    steady step first (the first step, which holds the compile, is not in it)."""
    from ftenv.selfcheck.mode_compile import LOSS_RTOL

    fair = [
        r
        for r in done.values()
        if r.get("parts")
        and "steady_step_s" in r
        and not r.get("fresh_process")
        and r.get("loss_max_rel_diff", math.inf) <= LOSS_RTOL["cuda"]
    ]
    return sorted(fair, key=lambda r: r["steady_step_s"])


def best_name(done: dict) -> str | None:
    order = ranked(done)
    return order[0]["arm"] if order else None


def break_even_steps(arm: dict, eager: dict) -> int | None:
    """Steps after which the arm's total time falls below eager's (None: never, its steady step is
    not faster)."""
    gain = eager["steady_step_s"] - arm["steady_step_s"]
    if gain <= 0:
        return None
    extra = arm["first_step_s"] - eager["first_step_s"]
    return 1 + max(0, math.ceil(extra / gain))


def best_arm(arms: list[dict]) -> dict | None:
    """The best arm on the steady step, with its x-eager ratio; None when none ran fairly."""
    done = {a["arm"]: a for a in arms}
    eager = measured(done, "eager")
    order = ranked(done)
    if eager is None or not order:
        return None
    best = order[0]
    keys = ("arm", "steady_step_s", "first_step_s", "compile_s", "break_even_steps", "recompiles")
    return {k: best.get(k) for k in (*keys, "validation_graphs")} | {
        "x_eager": best["steady_step_s"] / eager["steady_step_s"]
    }
