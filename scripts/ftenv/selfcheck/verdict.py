"""The self-check's verdict: a mode's measured steps judged by the step-time rules (ftenv.watchdog.stats)
plus the mode's own findings, as the result `ftenv selfcheck` prints, and each verdict's exit code."""

from __future__ import annotations

from ftenv import outcome, variables
from ftenv.attention.sdpa import FIX, interpret_deprioritized
from ftenv.selfcheck.measured import Measured
from ftenv.watchdog import stats
from ftenv.watchdog.step import mark_new_shapes


def verdict_of(measured: Measured) -> dict:
    """The result of one self-check run: the step-time verdict with its reasons and fix, the
    thresholds, every step, what the mode adds (`extra`), and its own checks' FAIL/INCONCLUSIVE
    reasons ahead of the step-time ones."""
    m, t = measured, measured.thresholds
    # The fix's wording follows the variable: already 1 -> how to find the other per-shape cost.
    summary = stats.summarize(
        m.steps,
        t,
        deprioritized=interpret_deprioritized(
            variables.given(variables.SDPA_DEPRIORITIZED, m.extra.get("environment", {}))
        ),
    )
    result = {
        "mode": m.mode,
        "verdict": summary.verdict,
        "summary": summary.to_dict(),
        "thresholds": {
            "new_over_seen": t.new_over_seen,
            "p95_over_median": t.p95_over_median,
            "max_over_median": t.max_over_median,
            "warmup": t.warmup,
        },
        "steps": [s.to_dict() for s in mark_new_shapes(m.steps)],
    }
    result.update(m.extra)
    s = result["summary"]
    if summary.verdict == outcome.FAIL and summary.fix is None:
        s["fix"] = (
            f"step times vary for a reason other than new shapes; if {FIX} is already set, run "
            "again on an idle machine, and read docs/selfcheck.md"
        )
    # A FAIL lists what failed first (the mode's own checks, then the step rules), the rest as passed.
    s["reasons"] = [
        *m.fails,
        *m.unsure,
        *stats.reasons_for(summary, bool(m.fails) or summary.verdict == outcome.FAIL),
    ]
    if m.fails:
        result["verdict"] = s["verdict"] = outcome.FAIL
        s["fix"] = m.fix or s.get("fix") or m.default_fix
    elif m.unsure and result["verdict"] == outcome.PASS:
        result["verdict"] = s["verdict"] = outcome.INCONCLUSIVE
    return result
