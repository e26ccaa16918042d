#!/usr/bin/env python3
"""Every GPU check of this project in one run, within a fixed time, its results in one folder.

    python3 scripts/gpu_checks.py [--wheels DIR] [--out DIR] [--only STEP,...] [--list]

Made for a GPU machine that has torch and transformers but not FunASR: `make gpu-kit` builds the
wheels it lacks, which the `install` step puts in a folder of their own (pip --no-index --no-deps
--target, nothing fetched); in the image, or in a checkout with the whole stack, leave out --wheels.
Every step runs even if an earlier one failed, each under its own time budget, all of them within
TOTAL_BUDGET_S. A step that needs a GPU says "skipped: no GPU" where there is none, so the whole run
can be rehearsed on a CPU machine (tests/test_gpu_kit.py does, in CI).

Results go to OUT (default $OUT, else ./gpu-results): summary.md (one line per step: expected, got,
seconds), summary.json (the same, with what each step read), steps.log (every command and its
output). `python -m imagetools gpukit results OUT` turns them into docs/gpu-results.md's Results.
Exit 0 when every step ended as expected, 1 otherwise, 2 on bad arguments.

Only the standard library is imported here before the kit is installed: this file must start on a
bare python3. It is longer than most modules because it is the one list of the GPU checks with their
expectations; the checks themselves live in ftenv and benchmarks/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))

from ftenv.build import versions  # noqa: E402  (standard library only)
from ftenv.report import sdpa  # noqa: E402  (pure logic, standard library only)

#: The whole run, the install included, must end within this (the GPU machine allows 10 minutes
#: a command and 15 minutes a session, start-up included: 8 minutes leaves room for a partial rerun).
TOTAL_BUDGET_S = 480
#: The stack the run expects: the lock of the image's variant, else of the default one.
LOCK = ROOT / "docker" / "locks" / f"{os.environ.get('FTENV_VARIANT') or versions.load().default.name}.txt"
#: Test files holding `pytest.mark.gpu` tests (tests/test_gpu_kit.py keeps this list complete).
GPU_TEST_FILES = ("tests/test_report_gpu.py", "tests/test_selfcheck.py")
#: Deselected in the pytest step: the self-check steps below run the same four self-checks.
GPU_TESTS_RUN_AS_STEPS = "test_gpu_passes_with_the_fix_and_fails_without"
#: The compiled fast path's GPU benchmark (benchmarks/), run when it is there.
COMPILED_BENCHMARK_GLOB = "*compile*.py"
#: What FunASR's recipe runs, and what the self-check's recipe path looks for on PATH.
FUNASR_SCRIPT = "funasr-train-ds"
NO_GPU = "skipped: no GPU"


@dataclass
class Result:
    step: str
    expected: str
    got: str = ""
    ok: bool | None = None  # None: not applicable (not present, or not run)
    seconds: float = 0.0
    data: dict = field(default_factory=dict)


@dataclass
class Context:
    out: Path
    log: Path
    env: dict[str, str]
    deadline: float
    gpu: dict | None = None  # {"name", "sm", "driver", ...} once the environment step has read it
    facts: dict = field(default_factory=dict)

    @property
    def exposed_at_0(self) -> bool:
        """Whether torch's rule puts cuDNN first here at =0 (the control must FAIL then)."""
        if not self.gpu:
            return False
        return bool(
            sdpa.cudnn_first_by_rule(
                self.facts.get("torch_version"),
                self.facts.get("cudnn_version"),
                tuple(self.gpu["sm"]),
                sdpa.interpret_env("0"),
            )
        )


# --- running one command under its budget ------------------------------------------------------


def run_logged(
    ctx: Context, title: str, cmd: list[str], budget_s: float, env: dict | None = None
) -> tuple[int | None, str]:
    """Run cmd with its own budget (cut to what the whole run has left); log everything.

    Returns (exit code, stdout+stderr); exit code None when the budget ran out (the process group
    is killed, torchrun's children included) or the whole run's time was gone before it started.
    """
    budget = min(budget_s, ctx.deadline - time.monotonic())
    with ctx.log.open("a") as log:
        log.write(f"\n===== {title}: {' '.join(cmd)}  (budget {max(budget, 0):.0f} s)\n")
    if budget < 1:
        note = f"[gpu_checks: not started: the run's {TOTAL_BUDGET_S} s are used up]"
        with ctx.log.open("a") as log:
            log.write(f"{note}\n===== {title}: timed out\n")
        return None, note
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env or ctx.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=budget)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        rc = None
        output += f"\n[gpu_checks: budget of {budget:.0f} s ran out; stopped]\n"
    with ctx.log.open("a") as log:
        log.write(output)
        log.write(f"===== {title}: {'timed out' if rc is None else f'exit {rc}'}\n")
    return rc, output


def json_tail(output: str) -> dict:
    """The JSON object a `--json` command printed, found among whatever else went to its output."""
    decoder = json.JSONDecoder()
    found: dict = {}
    for m in re.finditer(r"^\{", output, re.MULTILINE):
        try:
            obj, _ = decoder.raw_decode(output, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            found = obj
    return found


def ended(rc: int | None, output: str) -> str:
    if rc is None:
        return "timed out"
    last = next((ln for ln in reversed(output.strip().splitlines()) if ln.strip()), "")
    return f"exit {rc}: {last[-160:]}"


def ftenv(*args: str) -> list[str]:
    return [sys.executable, "-m", "ftenv.cli", *args]


def with_var(ctx: Context, value: str | None) -> dict[str, str]:
    env = dict(ctx.env)
    env.pop(sdpa.ENV_VAR, None)
    if value is not None:
        env[sdpa.ENV_VAR] = value
    return env


# --- the steps ---------------------------------------------------------------------------------


def step_install(ctx: Context, wheels: Path | None, site: Path) -> Result:
    r = Result("install", "the kit's wheels installed with pip --no-index --no-deps --target")
    if wheels is None:
        r.expected, r.got, r.ok = "no kit given: the stack as found", "nothing to install", True
        return r
    files = sorted(wheels.glob("*.whl"))
    if not files:
        r.got, r.ok = f"no .whl in {wheels}: build the kit with `make gpu-kit`", False
        return r
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    cmd += ["--no-cache-dir", "--upgrade", "--target", str(site), *map(str, files)]
    rc, output = run_logged(ctx, "install", cmd, 90)
    r.ok = rc == 0
    r.got = f"{len(files)} wheels installed" if r.ok else ended(rc, output)
    r.data = {"wheels": [f.name for f in files]}
    return r


def step_environment(ctx: Context) -> Result:
    r = Result("environment", "GPU, driver, torch, cuDNN, transformers, funasr read")
    rc, output = run_logged(ctx, "environment", ftenv("report", "--json", "--no-gpu-probe"), 60)
    facts = json_tail(output).get("facts", {})
    listed = 0  # GPUs the driver lists: the report must see as many, or every GPU step is skipped
    if shutil.which("nvidia-smi"):
        run_logged(ctx, "nvidia-smi", ["nvidia-smi"], 20)
        _, names = run_logged(ctx, "nvidia-smi -L", ["nvidia-smi", "-L"], 20)
        listed = len(re.findall(r"^GPU \d+:", names, flags=re.M))
    run_logged(ctx, "pip list", [sys.executable, "-m", "pip", "list", "--format=freeze"], 30)
    ctx.facts = facts
    gpus = facts.get("gpus") or []
    ctx.gpu = gpus[0] | {"driver": facts.get("driver_version")} if gpus else None
    r.ok = rc == 0 and bool(facts.get("torch_version")) and len(gpus) >= listed
    gpu = f"{ctx.gpu['name']} ({sdpa.sm_name(tuple(ctx.gpu['sm']))})" if ctx.gpu else "no GPU"
    if len(gpus) < listed:
        gpu = f"{gpu} read by ftenv report, but nvidia-smi lists {listed}"
    r.got = (
        f"{gpu}, driver {facts.get('driver_version') or 'none'}, torch {facts.get('torch_version')}, "
        f"cuDNN {sdpa.cudnn_name(facts.get('cudnn_version'))}, transformers "
        f"{facts.get('transformers_version')}, funasr {facts.get('funasr_version')}"
        if facts
        else ended(rc, output)
    )
    r.data = {"facts": facts, "python": sys.version.split()[0]}
    return r


def step_stack(ctx: Context) -> Result:
    r = Result("stack", f"every package of {LOCK.name} importable; FunASR's {FUNASR_SCRIPT} found")
    rc, output = run_logged(ctx, "stack", [sys.executable, str(Path(__file__)), "--check-stack"], 90)
    data = json_tail(output)
    r.ok = rc == 0 and not data.get("problems")
    # For the record only: the machine's own packages may disagree among themselves.
    _, pip_check = run_logged(ctx, "pip check", [sys.executable, "-m", "pip", "check"], 30)
    r.data = data | {"pip_check": pip_check.strip().splitlines()[-50:]}
    if data:
        r.got = (
            "; ".join(data["problems"])
            if data["problems"]
            else (
                f"{data['present']} packages present ({len(data['other_versions'])} in the machine's "
                "own versions), funasr imports"
            )
        )
    else:
        r.got = ended(rc, output)
    return r


def check_stack() -> int:
    """Run in a child process (the kit on its path): is the locked stack there and usable?"""
    from importlib import metadata

    problems, other, missing = [], {}, 0
    reqs = lock_requirements(LOCK)
    for name, version in reqs.items():
        try:
            got = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} missing (not on this machine, not in the kit)")
            missing += 1
            continue
        if got.split("+")[0] != version:
            other[name] = f"{version} locked, {got} here"
    try:
        (entry,) = metadata.entry_points(group="console_scripts", name=FUNASR_SCRIPT)
        entry.load()
    except Exception as exc:  # any import failure is the finding
        problems.append(f"{FUNASR_SCRIPT}'s code does not import: {type(exc).__name__}: {exc}")
    if not shutil.which(FUNASR_SCRIPT):
        problems.append(f"{FUNASR_SCRIPT} is not on PATH (the recipe self-check runs it)")
    print(json.dumps({"present": len(reqs) - missing, "problems": problems, "other_versions": other}))
    return 1 if problems else 0


def lock_requirements(path: Path) -> dict[str, str]:
    """{name: version} of the lock's entries whose marker holds for the running Python."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    reqs = {}
    for entry in lock_entries(path):
        req = Requirement(entry["requirement"])
        if req.marker is None or req.marker.evaluate():
            reqs[canonicalize_name(req.name)] = str(req.specifier).removeprefix("==")
    return reqs


def lock_entries(path: Path) -> list[dict]:
    """The lock's entries: {"requirement": "name==version ; marker", "hashes": [...]}."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    entries = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        requirement, *hashes = (part.strip() for part in line.split("--hash="))
        entries.append({"requirement": requirement, "hashes": hashes})
    return entries


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
    return "ok" if sdpa.interpret_env(value).deprioritizes or not ctx.exposed_at_0 else "exposed"


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
    found = sorted((ROOT / "benchmarks").glob(COMPILED_BENCHMARK_GLOB))
    if not found:
        return Result("steptime-compiled", "eager+1 vs compiled step times", "not present", None)
    script = found[0].relative_to(ROOT)
    r = Result("steptime-compiled", f"{script}: eager+1 vs compiled step times, exit 0")
    if not ctx.gpu:
        r.got = NO_GPU
        return r
    cmd = [sys.executable, str(script), "--json", str(ctx.out / "compile_speedup.json")]
    rc, output = run_logged(ctx, "steptime-compiled", cmd, 300, with_var(ctx, "1"))
    r.ok = rc == 0
    r.got = ended(rc, output)
    r.data = {"output_tail": output[-4000:]}
    return r


def _s(v) -> str:
    return "n/a" if v is None else f"{v:.3f} s"


def _x(v) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


STEPS = [
    "install",
    "environment",
    "stack",
    "selfcheck-cpu",
    "report-1",
    "report-0",
    "report-unset",
    "pytest-gpu",
    "selfcheck-1",
    "selfcheck-0",
    "recipe-1",
    "recipe-0",
    "probe",
    "report-overhead",
    "selfcheck-compile",
    "steptime-compiled",
]


def dispatch(ctx: Context, name: str, wheels: Path | None, site: Path) -> Result:
    if name == "install":
        return step_install(ctx, wheels, site)
    if name == "environment":
        return step_environment(ctx)
    if name == "stack":
        return step_stack(ctx)
    if name == "selfcheck-cpu":
        return step_selfcheck_cpu(ctx)
    if name.startswith("report-") and name != "report-overhead":
        value = name.removeprefix("report-")
        return step_report(ctx, None if value == "unset" else value)
    if name == "pytest-gpu":
        return step_pytest(ctx)
    if name == "selfcheck-compile":
        return step_selfcheck_compiled(ctx)
    if name.startswith(("selfcheck-", "recipe-")):  # selfcheck-1, recipe-0, ...
        kind, value = name.split("-")
        return step_selfcheck(ctx, value, kind == "recipe")
    if name == "probe":
        return step_probe(ctx)
    if name == "report-overhead":
        return step_report_overhead(ctx)
    return step_compiled(ctx)


# --- the run -----------------------------------------------------------------------------------


def status(r: Result) -> str:
    return {True: "as expected", False: "NOT as expected", None: "n/a"}[r.ok]


def render_table(results: list[Result]) -> str:
    lines = ["| step | expected | got | seconds | |", "|---|---|---|---|---|"]
    for r in results:
        got = r.got.replace("|", "/").replace("\n", " ")
        lines.append(f"| {r.step} | {r.expected} | {got} | {r.seconds:.1f} | {status(r)} |")
    return "\n".join(lines)


def run_all(args: argparse.Namespace, site: Path) -> int:
    start = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", FTENV_REPORT="0")
    paths = [str(site), str(SCRIPTS)] if args.wheels else [str(SCRIPTS)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(site / "bin"), os.path.dirname(sys.executable), env["PATH"]])
    ctx = Context(out, out / "steps.log", env, deadline=start + args.budget)
    ctx.log.write_text(f"gpu_checks: python {sys.version.split()[0]} at {sys.executable}\n")
    wanted = STEPS if not args.only else args.only
    results = []
    for name in STEPS:
        if name not in wanted and name not in ("install", "environment"):  # the others need these
            continue
        t0 = time.monotonic()
        try:
            r = dispatch(ctx, name, args.wheels, site)
        except Exception as exc:  # one broken step must not stop the others
            r = Result(name, "runs", f"the step itself broke: {type(exc).__name__}: {exc}", False)
        r.seconds = time.monotonic() - t0
        results.append(r)
        print(f"{r.step}: {status(r)} in {r.seconds:.1f} s: {r.got}", flush=True)
    total = time.monotonic() - start
    table = render_table(results)
    summary = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "total_seconds": round(total, 1),
        "budget_seconds": args.budget,
        "gpu": ctx.gpu,
        "facts": {k: ctx.facts.get(k) for k in ("torch_version", "torch_cuda", "cudnn_version")}
        | {k: ctx.facts.get(k) for k in ("driver_version", "transformers_version", "funasr_version")},
        "python": sys.version.split()[0],
        "steps": [asdict(r) for r in results],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(f"{table}\n\ntotal {total:.1f} s (budget {args.budget} s)\n")
    print()
    print(table)
    print(f"\ntotal {total:.1f} s of {args.budget} s; results in {out}")
    return 0 if all(r.ok is not False for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--wheels", type=Path, help="folder of the kit's wheels (made by `make gpu-kit`)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu-results", help="results folder")
    ap.add_argument("--site", help="where the kit goes (default: a new temporary folder)")
    ap.add_argument("--only", type=lambda s: s.split(","), help="these steps only (comma-separated)")
    ap.add_argument("--budget", type=int, default=TOTAL_BUDGET_S, help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="print the steps and exit")
    ap.add_argument("--check-stack", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.check_stack:
        return check_stack()
    if args.list:
        print("\n".join(STEPS))
        return 0
    unknown = sorted(set(args.only or []) - set(STEPS))
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}: choose from {', '.join(STEPS)} (see --list)")
    if args.wheels is not None and not args.wheels.is_dir():
        ap.error(f"--wheels {args.wheels}: no such folder; build the kit with `make gpu-kit`")
    if args.site:
        return run_all(args, Path(args.site))
    with tempfile.TemporaryDirectory(prefix="ftenv-gpukit-") as site:  # the kit goes with the run
        return run_all(args, Path(site))


if __name__ == "__main__":
    sys.exit(main())
