"""The GPU kit's steps for the variant whose cuDNN carries the fix of pytorch#196678 (its self-check
at TORCH_CUDNN_SDPA_DEPRIORITIZED=1 and =0) and the NaN reproducer of that bug and of the corner
case still reported from cuDNN 9.26 on: their own module, so that the list of steps (gpu_steps)
stays one screen of what runs. They rank after the compile matrix, which leaves them their time."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ftenv import outcome
from ftenv.attention import sdpa
from ftenv.stack import versions
from imagetools.gpukit.gpu_run import Context, Result, ended, json_tail, run_logged

#: pytorch#196678's reproducer and the corner case of NVIDIA/cudnn-frontend#1072, cuDNN forced.
NAN_REPRO_SCRIPT = "benchmarks/sdpa_nan_repro.py"
NAN_STEP = "sdpa-nan"
VARIANT_SELFCHECKS = ("variant-selfcheck-1", "variant-selfcheck-0")
#: Each step's own budget: the matrix before them leaves these seconds for those that will run.
BUDGET_S = {NAN_STEP: 90, VARIANT_SELFCHECKS[0]: 60, VARIANT_SELFCHECKS[1]: 60}
#: In the kit's order, after the compile matrix.
STEPS = (*VARIANT_SELFCHECKS, NAN_STEP)


def fixed_cudnn_variant() -> versions.Variant | None:
    """The variant of versions.toml whose cuDNN carries the NaN fix (the newest torch of them)."""
    fixed = [v for v in versions.load().variants.values() if v.cudnn_int >= sdpa.NAN_GRAD_FIXED_CUDNN]
    return max(fixed, key=lambda v: versions.release(v.torch), default=None)


def variant_not_run(ctx: Context, name: str) -> Result | None:
    """The variant self-check's Result when it cannot run here, saying why; None when the installed
    torch is the variant's (the self-check then runs, or says it has no GPU). Only 64 MiB travel to
    a lent GPU machine: torch comes from the machine, so the step checks it rather than pretending."""
    value = name.rsplit("-", 1)[1]
    want = "PASS" if value == "1" else "FAIL where torch puts cuDNN first, else PASS"
    variant = fixed_cudnn_variant()
    if variant is None:
        floor = f"cuDNN >= {sdpa.cudnn_name(sdpa.NAN_GRAD_FIXED_CUDNN)}"
        return Result(
            name, f"the variant with {floor}: {want}", f"no variant in versions.toml has {floor}: not run"
        )
    expected = f"{variant.name} (torch {variant.torch_base}, cuDNN {variant.cudnn}): {want}"
    found = ctx.facts.get("torch_version")
    if versions.release(found) != versions.release(variant.torch):
        return Result(name, expected, f"needs torch {variant.torch_base}, found {found or 'none'}: not run")
    return None


def reserved_after_matrix(ctx: Context) -> float:
    """Seconds the compile matrix leaves for the steps of this module that follow it in this run
    and will run (a variant self-check that cannot run here costs nothing)."""
    will_run = [
        name
        for name in ctx.steps
        if name == NAN_STEP or (name in VARIANT_SELFCHECKS and ctx.gpu and variant_not_run(ctx, name) is None)
    ]
    return float(sum(BUDGET_S[name] for name in will_run))


def step_sdpa_nan(ctx: Context) -> Result:
    """The reproducer, cuDNN forced, run even without a GPU (it then says "unknown" and exits 3):
    NaN counts of dQ/dK/dV in each case, against what the public reports predict on this GPU."""
    if ctx.gpu:
        r = Result(NAN_STEP, "every case runs on cuDNN; NaN where the reports predict them, none elsewhere")
    else:
        r = Result(NAN_STEP, f"unknown: cuDNN attention cannot run here (exit {outcome.INCONCLUSIVE_CODE})")
    rc, output = run_logged(ctx, r.step, [sys.executable, NAN_REPRO_SCRIPT], BUDGET_S[NAN_STEP])
    data = json_tail(output)
    r.data = data
    if not data:
        r.got, r.ok = ended(rc, output), False
        return r
    if data.get("unavailable"):
        r.got = f"unknown: cuDNN attention cannot run here ({data['unavailable']}), exit {rc}"
        r.ok = not ctx.gpu and rc == outcome.INCONCLUSIVE_CODE
        return r
    cases = data.get("cases", [])
    r.got = f"cuDNN {data.get('cudnn_name')}: " + "; ".join(map(case_summary, cases))
    ran_all = bool(cases) and all(c.get("ran") for c in cases)
    r.ok = rc in (outcome.EXIT[outcome.PASS], outcome.EXIT[outcome.FAIL]) and ran_all
    r.ok = r.ok and not any(c.get("matches") is False for c in cases)
    return r


def case_summary(case: dict) -> str:
    if not case.get("ran"):
        return f"{case['case']}: not run on cuDNN ({case.get('refused')})"
    nan = case["nan"]
    verdict = {True: "as predicted", False: "NOT as predicted", None: "no prediction"}[case.get("matches")]
    return f"{case['case']}: NaN dQ {nan['dq']}, dK {nan['dk']}, dV {nan['dv']} ({verdict})"


def dispatch(ctx: Context, name: str, selfcheck: Callable[..., Result]) -> Result:
    """Run one of STEPS; `selfcheck` is the kit's self-check step (gpu_steps.step_selfcheck)."""
    if name == NAN_STEP:
        return step_sdpa_nan(ctx)
    r = variant_not_run(ctx, name) or selfcheck(ctx, name.rsplit("-", 1)[1], recipe=False)
    r.step = name
    return r
