"""The GPU kit's steps (scripts/gpu_checks.py runs them): each one command with its expectation.
The checks themselves live in ftenv and benchmarks/; this is the one list of them with what each
should give on a GPU and on a CPU."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ftenv.attention import sdpa
from imagetools.gpukit import gpu_variant_steps as variant
from imagetools.gpukit.gpu_decode_step import step_batched_decode
from imagetools.gpukit.gpu_run import (
    COMPILED_BENCHMARK_GLOB,
    GPU_TEST_FILES,
    GPU_TESTS_RUN_AS_STEPS,
    NO_GPU,
    ROOT,
    Context,
    Result,
    ended,
    ftenv,
    json_tail,
    run_logged,
    with_var,
)
from imagetools.gpukit.gpu_setup import step_environment, step_install, step_stack

#: Seconds the matrix leaves of its step's time for its own start and its table.
COMPILED_BENCHMARK_MARGIN_S = 40
#: The call that starts NCCL on the GPU and says which network it picked.
NCCL_NETWORK_SCRIPT = "benchmarks/nccl_network.py"
# --- the steps ---------------------------------------------------------------------------------


def step_selfcheck_cpu(ctx: Context) -> Result:
    """The in-process self-check on the CPU: FunASR's model code runs from the kit, GPU or not."""
    r = Result("selfcheck-cpu", "PASS (no cuDNN on a CPU)")
    rc, output = run_logged(ctx, "selfcheck-cpu", ftenv("selfcheck", "--json", "--device", "cpu"), 120)
    data = json_tail(output)
    r.ok = rc == 0 and data.get("verdict") == "PASS"
    r.got = f"{data['verdict']} (exit {rc})" if data.get("verdict") else ended(rc, output)
    r.data = {"verdict": data.get("verdict"), "summary": data.get("summary")}
    return r


def expected_verdict(ctx: Context, value: str | None) -> str:
    """The report's verdict level with the variable at `value` (None: unset) on this machine."""
    if not ctx.gpu:
        return "no-gpu"
    return "ok" if sdpa.interpret_deprioritized(value).deprioritizes or not ctx.exposed_at_0 else "exposed"


def expected_selfcheck(ctx: Context, value: str) -> str:
    """PASS, or FAIL at 0 where cuDNN goes first (the control: the check sees the real stall)."""
    return "FAIL" if value == "0" and ctx.exposed_at_0 else "PASS"


def step_report(ctx: Context, value: str | None) -> Result:
    name = f"report-{value if value is not None else 'unset'}"
    want = expected_verdict(ctx, value)
    r = Result(name, f"verdict {want}")
    rc, output = run_logged(ctx, name, ftenv("report", "--json"), 60, with_var(ctx, value))
    data = json_tail(output)
    level = data.get("verdict", {}).get("level")
    r.ok = rc == 0 and level == want
    r.got = f"verdict {level}: {data['verdict']['reason'][:120]}" if level else ended(rc, output)
    r.data = {"verdict": data.get("verdict"), "live_order": data.get("live_order_names")}
    return r


def step_pytest(ctx: Context) -> Result:
    r = Result("pytest-gpu", "all passed" if ctx.gpu else "all skipped (no GPU)")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu"]
    cmd += ["-k", f"not {GPU_TESTS_RUN_AS_STEPS}", *GPU_TEST_FILES]
    rc, output = run_logged(ctx, "pytest-gpu", cmd, 120)
    counts = dict(
        (word, int(n)) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error|errors)", output)
    )
    if ctx.gpu:
        r.ok = rc == 0 and counts.get("passed", 0) > 0 and not counts.get("skipped")
    else:
        r.ok = rc == 0 and counts.get("skipped", 0) > 0 and not counts.get("passed")
    said = ", ".join(f"{n} {w}" for w, n in counts.items())
    r.got = f"{said} (exit {rc})" if counts else ended(rc, output)
    r.data = {"counts": counts}
    return r


def step_selfcheck(ctx: Context, value: str, recipe: bool) -> Result:
    name = f"{'recipe' if recipe else 'selfcheck'}-{value}"
    want = expected_selfcheck(ctx, value)
    r = Result(name, want if ctx.gpu else NO_GPU)
    if not ctx.gpu:
        r.got = NO_GPU
        return r
    cmd = ftenv("selfcheck", "--json", "--device", "cuda", *(["--recipe"] if recipe else []))
    rc, output = run_logged(ctx, name, cmd, 90 if recipe else 60, with_var(ctx, value))
    data = json_tail(output)
    s = data.get("summary", {})
    verdict = data.get("verdict")
    r.ok = verdict == want
    if verdict:
        r.got = (
            f"{verdict}: new-shape step {_s(s.get('new_median'))}, seen {_s(s.get('seen_median'))}, "
            f"new/seen {_x(s.get('new_over_seen'))}"
        )
    else:
        r.got = ended(rc, output)
    r.data = {"verdict": verdict, "summary": s}
    return r


def step_probe(ctx: Context) -> Result:
    if not ctx.gpu:
        return Result("probe", NO_GPU, NO_GPU)
    exposed = ctx.exposed_at_0
    want = "a new shape costs more with cuDNN first" if exposed else "costs measured (cuDNN never first here)"
    r = Result("probe", want)
    rc, output = run_logged(ctx, "probe", ftenv("probe", "--json"), 60, with_var(ctx, "1"))
    modes = json_tail(output).get("modes", {})
    now, first = (modes.get(m, {}).get("median_cost") for m in ("current", "cudnn-first"))
    if now is None or first is None:
        r.got, r.ok = ended(rc, output), False
    else:
        r.got = f"per new shape: {_s(first)} cuDNN first, {_s(now)} deprioritized"
        r.ok = rc == 0 and (first > now if exposed else True)
    r.data = {"modes": modes}
    return r


def step_report_overhead(ctx: Context) -> Result:
    r = Result("report-overhead", "ftenv report beyond import torch measured (target: at most 1 s)")
    rounds = "5" if ctx.gpu else "1"  # without a GPU the number means little: just try the benchmark
    cmd = [sys.executable, "benchmarks/report_overhead.py", "--inside", "--rounds", rounds]
    rc, output = run_logged(ctx, "report-overhead", cmd, 60)
    m = re.search(r"report overhead beyond import torch: ([+-][\d.]+) s \(ratio ([\d.]+)\)", output)
    r.ok = rc == 0 and m is not None
    r.got = f"{m.group(1)} s (ratio {m.group(2)})" if m else ended(rc, output)
    r.data = {"overhead_s": float(m.group(1)) if m else None}
    return r


def step_nccl_network(ctx: Context) -> Result:
    """NCCL started on the GPU (one rank, NCCL_DEBUG=INFO, INIT and NET only): the network it picked,
    in its own words (NET/IB with the ports, NET/Socket with the interfaces, or a plugin)."""
    if not ctx.gpu:
        return Result("nccl-network", NO_GPU, NO_GPU)
    r = Result(
        "nccl-network", "NCCL starts and names its network (InfiniBand/RoCE, a plugin, or TCP sockets)"
    )
    rc, output = run_logged(ctx, r.step, [sys.executable, NCCL_NETWORK_SCRIPT], 150)
    data = json_tail(output)
    r.ok = rc == 0 and bool(data.get("network"))
    r.got = data["transport"] if data.get("transport") else ended(rc, output)
    r.data = {
        k: data.get(k) for k in ("network", "ib_devices", "socket_interfaces", "ib_none", "nccl_net_lines")
    }
    return r


def step_selfcheck_compiled(ctx: Context) -> Result:
    """The compiled decoder on the GPU beside eager: few recompiles over the new shapes, same losses."""
    if not ctx.gpu:
        return Result("selfcheck-compile", NO_GPU, NO_GPU)
    r = Result("selfcheck-compile", "PASS: at most 2 recompiles over the new shapes, losses as eager's")
    cmd = ftenv("selfcheck", "--json", "--device", "cuda", "--compile")
    rc, output = run_logged(ctx, r.step, cmd, 150, with_var(ctx, "1"))
    data = json_tail(output)
    c = data.get("compile", {})
    diff = c.get("loss_max_rel_diff")
    diff = f"{diff:.1e}" if isinstance(diff, float) else diff
    verdict = data.get("verdict")
    r.ok = verdict == "PASS"
    r.got = (
        f"{verdict}: {c.get('recompiles')} recompiles over {c.get('new_shapes')} new shapes, compile "
        f"{_s(c.get('compile_s'))}, losses within {diff} of eager"
        if verdict
        else ended(rc, output)
    )
    r.data = {"verdict": verdict, "compile": c}
    return r


def step_compiled(ctx: Context) -> Result:
    """The benchmark matrix (benchmarks/compile_speedup.py), given what is left of the run's time
    minus a margin, so that it stops starting arms and prints its table before it is killed. It is
    the GPU kit's first call (`--only steptime-compiled`, docs/gpu-results.md)."""
    found = sorted((ROOT / "benchmarks").glob(COMPILED_BENCHMARK_GLOB))
    if not found:
        return Result("steptime-compiled", "the compile matrix's step times", "not present", None)
    script = found[0].relative_to(ROOT)
    r = Result("steptime-compiled", f"{script}: the matrix's arms against eager+1, exit 0")
    if not ctx.gpu:
        r.got = NO_GPU
        return r
    budget = max(
        ctx.deadline - time.monotonic() - COMPILED_BENCHMARK_MARGIN_S - variant.reserved_after_matrix(ctx), 0
    )
    result = ctx.out / "compile_speedup.json"
    cmd = [sys.executable, str(script), "--json", str(result), "--budget-s", f"{budget:.0f}"]
    rc, output = run_logged(
        ctx, "steptime-compiled", cmd, budget + COMPILED_BENCHMARK_MARGIN_S, with_var(ctx, "1")
    )
    r.ok = rc == 0
    r.got = ended(rc, output)
    r.data = {"output_tail": output[-6000:]}
    try:  # written after each arm: a cut run keeps the arms that ran
        r.data["matrix"] = json.loads(result.read_text())
    except (OSError, ValueError):
        return r
    if rc == 0:
        r.got = matrix_summary(r.data["matrix"])
    return r


def matrix_summary(out: dict) -> str:
    """One line of the matrix: its best arm on the steady step (the benchmark picks it), its compile
    and break-even, and the floor (the best arm's GPU-busy seconds per step)."""
    best = out.get("best")
    if not best:
        return f"no compiled arm ran with eager's losses ({len(out.get('arms', []))} arms)"
    floor = (out.get("floor") or {}).get("floor_s")
    return (
        f"best {best['arm']}: steady step {best['steady_step_s']:.4f} s = {best['x_eager']:.2f}x eager's, "
        f"compile {_s(best.get('compile_s'))}, break-even after {best.get('break_even_steps')} steps, "
        f"{best.get('recompiles')} recompiles (+{best.get('validation_graphs')} validation graphs); "
        f"GPU-busy floor {_s(floor)}"
    )


def _s(v) -> str:
    return "n/a" if v is None else f"{v:.3f} s"


def _x(v) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


#: Every step after `install` (which needs the kit's folders: dispatch), in the kit's order, and
#: what runs it; gpu_checks.py's `--list` prints them and `--only` picks among them.
RUNS: dict[str, Callable[[Context], Result]] = {
    "environment": step_environment,
    "stack": step_stack,
    "selfcheck-cpu": step_selfcheck_cpu,
    "report-1": partial(step_report, value="1"),
    "report-0": partial(step_report, value="0"),
    "report-unset": partial(step_report, value=None),
    "pytest-gpu": step_pytest,
    "selfcheck-1": partial(step_selfcheck, value="1", recipe=False),
    "selfcheck-0": partial(step_selfcheck, value="0", recipe=False),
    "recipe-1": partial(step_selfcheck, value="1", recipe=True),
    "recipe-0": partial(step_selfcheck, value="0", recipe=True),
    "probe": step_probe,
    "report-overhead": step_report_overhead,
    "batched-decode": step_batched_decode,
    "nccl-network": step_nccl_network,
    "selfcheck-compile": step_selfcheck_compiled,
    "steptime-compiled": step_compiled,
    **{name: partial(variant.dispatch, name=name, selfcheck=step_selfcheck) for name in variant.STEPS},
}
STEPS = ["install", *RUNS]


def dispatch(ctx: Context, name: str, wheels: Path | None, site: Path) -> Result:
    return step_install(ctx, wheels, site) if name == "install" else RUNS[name](ctx)
