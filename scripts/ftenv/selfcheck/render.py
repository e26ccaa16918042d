"""The self-check's text table (what `ftenv selfcheck` prints without --json)."""

from __future__ import annotations

from functools import partial

from ftenv import outcome, text, variables
from ftenv.attention.sdpa import cudnn_name

_fmt_s = partial(text.number, digits=3, unit=" s")
_fmt_x = partial(text.number, digits=2, unit="x")


def render(result: dict) -> str:
    s = result["summary"]
    t = result["thresholds"]
    env = result["environment"]
    where = env["device"]
    if env.get("gpu"):
        where = f"{env['gpu']} ({env['sm']})"
    cudnn = env.get("cudnn")
    cudnn_txt = cudnn_name(cudnn) if cudnn else "n/a"
    raw = variables.given(variables.SDPA_DEPRIORITIZED, env)
    lines = [
        f"== ftenv selfcheck ({result['mode']}): Fun-ASR-Nano fine-tune steps on {where} ==",
        f"stack     torch {env['torch']}, cuDNN {cudnn_txt}, "
        f"{text.assignment(variables.SDPA_DEPRIORITIZED, raw)}",
    ]
    if result.get("injected_stall_s"):
        lines.append(f"TEST AID  an SDPA stall of {result['injected_stall_s']} s per new shape was injected")
    lines += [
        f"steps     {s['n_steps']} timed after {s['n_warmup']} warm-up; {s['n_new']} on new shapes, "
        f"{s['n_seen']} on shapes seen before",
        f"  median new-shape step    {_fmt_s(s['new_median'])}",
        f"  median seen-shape step   {_fmt_s(s['seen_median'])}",
        f"  new / seen               {_fmt_x(s['new_over_seen'])}   (FAIL at >= {t['new_over_seen']:g}x)",
        f"  p95 / median             {_fmt_x(s['p95_over_median'])}   (FAIL at >= {t['p95_over_median']:g}x)",
        f"  max / median             {_fmt_x(s['max_over_median'])}   (FAIL at >= {t['max_over_median']:g}x)",
    ]
    losses = result.get("losses") or []
    if losses:
        lines.append(f"  loss                     {losses[0]:.3f} -> {losses[-1]:.3f}")
    if result.get("compile"):
        lines += compile_lines(result["compile"])
    lines.append(
        f"  wall time                {result['wall_seconds']:.1f} s (set-up {result['setup_seconds']:.1f} s)"
    )
    verdict = s["verdict"]
    if verdict == outcome.PASS:
        lines.append(
            f"PASS: step times are flat: steps on new batch shapes take {_fmt_x(s['new_over_seen'])} "
            "the steps on shapes seen before"
            + ("; no per-shape recompiles; losses match eager" if result.get("compile") else "")
        )
    else:
        lines.append(f"{verdict}:" if verdict == outcome.FAIL else f"{verdict}: the check could not decide")
        lines.extend(f"  - {reason}" for reason in s["reasons"])
        if verdict == outcome.FAIL:
            lines.append(f"fix: {s['fix'] or 'see docs/selfcheck.md'}")
    return "\n".join(lines)


def compile_lines(c: dict) -> list[str]:
    """The compiled mode's lines: what was compiled, its cost, recompiles and numerics vs eager."""
    how = "dynamic=True"
    if c["forced_recompiles"]:
        how = "dynamic=False (TEST AID: forced per-shape recompiles)"
    recompiles = "unknown" if c["recompiles"] is None else str(c["recompiles"])
    return [
        f"compile   decoder forward through torch.compile({how}); beside it an eager run of the "
        "same seeded steps",
        f"  compile time             {c['compile_s']:.1f} s (first compiled step "
        f"{_fmt_s(c['first_step_s'])}, first eager step {_fmt_s(c['eager_first_step_s'])})",
        f"  recompiles               {recompiles} over {c['new_shapes']} new shapes   "
        f"(FAIL at > {c['max_recompiles']})",
        f"  loss vs eager            max relative difference {c['loss_max_rel_diff']:.1e}   "
        f"(FAIL above {c['loss_rtol']:g})",
        f"  median step              compiled {_fmt_s(c['compiled_median_step_s'])}, "
        f"eager {_fmt_s(c['eager_median_step_s'])}",
    ]
