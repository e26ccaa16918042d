"""The matrix run: each arm trained on the same model and batches (`run_arm`), the floor's passes
(`run_profile`), the warm start in a fresh process (`run_fresh`, `child`), and the loop over the
arms in order, each past its gate, the JSON rewritten after every arm (`run_matrix`)."""

from __future__ import annotations

import copy
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.matrix.arms import (
    ARMS,
    FINE_BUCKETS,
    PROFILE_STEPS,
    VALIDATE_AFTER,
    VALIDATION_BATCHES,
    WARM_STEPS,
    Arm,
    best_name,
    break_even_steps,
    refusal,
)
from benchmarks.matrix.measure import cudagraph_records, profile_steps, train_steps
from benchmarks.matrix.model import applied, build_model, prepared, random_batches, sizes, tiny_items
from benchmarks.matrix.stepcount import count_arm, graph_breaks
from benchmarks.matrix.table import summary
from ftenv import variables

#: The command a fresh process runs (`--child`).
COMMAND = Path(__file__).resolve().parents[1] / "compile_speedup.py"


def say(text: str) -> None:
    print(f"compile_speedup: {text}", file=sys.stderr, flush=True)


def run_arm(model, initial, arm: Arm, batches, val, args, cache_root: Path, deadline: float, eager) -> dict:
    """Train the arm's steps with a validation pass half-way; its numbers (not its ranking)."""
    import torch

    result = {"arm": arm.name, **asdict(arm), "parts": list(arm.parts)}
    batches, val = prepared(arm, batches), prepared(arm, val)
    steps = batches[: WARM_STEPS if arm.fresh_process else args.steps]
    with applied(model, initial, arm, args.device, args.backend, cache_root) as done:
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t = train_steps(
            model,
            steps,
            args.device,
            fused=arm.fused,
            deadline=deadline,
            log_interval=arm.log_interval,
            val=val,
            val_at=max(1, int(args.steps * VALIDATE_AFTER)),  # the same step in every arm (warm: none)
        )
    if not t.seconds:
        return result | {"status": "not run: the time budget was spent"}
    warm = min(args.warmup, len(t.seconds) - 1)
    steady = statistics.fmean(t.seconds[warm:]) if warm else statistics.fmean(t.seconds)
    ref, ref_val = (eager or {}).get("losses") or t.losses, (eager or {}).get("val_losses") or t.val_losses
    diffs = [abs(g - w) / max(abs(w), 1e-12) for g, w in zip(t.losses, ref, strict=False)]
    diffs += [abs(g - w) / max(abs(w), 1e-12) for g, w in zip(t.val_losses, ref_val, strict=False)]
    counted = None not in t.graphs and None not in t.graphs_around_validation
    val_graphs = (
        t.graphs_around_validation[1] - t.graphs_around_validation[0] if t.val_losses and counted else None
    )
    out = result | {
        "status": "ran" if len(t.seconds) == len(steps) else f"cut at {len(t.seconds)} of {len(steps)} steps",
        "notes": done["notes"],
        "steps": len(t.seconds),
        "steady_step_s": steady,
        "first_step_s": t.seconds[0],
        "compile_s": max(0.0, t.seconds[0] - steady) if arm.parts else 0.0,
        "warm_start": bool(arm.cache_of or arm.fresh_process),
        "recompiles": t.graphs[-1] - t.graphs[0] - (val_graphs or 0) if counted and arm.parts else None,
        "validation_graphs": val_graphs if arm.parts else None,
        "graph_breaks": graph_breaks() if arm.parts else None,
        "compiled_calls": sum(s.calls["compiled"] for s in done["switches"]),
        "cudagraph_records": cudagraph_records() if "cudagraphs" in arm.parts else None,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else None,
        "loss_max_rel_diff": max(diffs) if eager and diffs else 0.0,
        "losses": t.losses,
        "val_losses": t.val_losses,
        "seconds": t.seconds,
    }
    if eager and "steady_step_s" in eager:
        out["break_even_steps"] = break_even_steps(out, eager) if arm.parts else None
    return out


def run_profile(model, initial, arm: Arm, of: Arm, batches, args, cache_root: Path) -> dict:
    """The floor's passes over arm `of`: the profiler's (its caches warm; kernels and GPU-busy
    seconds on a GPU), then the count of a step's ATen ops and host syncs (stepcount.count_arm, the
    one definition benchmarks/dispatch_proxy.py counts by too)."""
    with applied(model, initial, of, args.device, args.backend, cache_root):
        numbers = profile_steps(model, prepared(of, batches)[: PROFILE_STEPS + 1], args.device, of.fused)
    counts = count_arm(model, initial, of, batches[: PROFILE_STEPS + 1], args.device)
    counts = {k: v for k, v in counts.items() if k not in ("parts", "steps")}
    return {"arm": arm.name, "profile_of": of.name, "parts": [], "status": "ran", **numbers, **counts}


def run_fresh(arm: Arm, state: Path, args, left_s: float) -> dict:
    """The arm in a new Python process (model built again, same seeds), on the caches in `state`."""
    out = state / f"{arm.name}.json"
    cmd = [sys.executable, str(COMMAND), "--child", arm.name, "--state", str(state)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(left_s, 1))
    except subprocess.TimeoutExpired:
        return {"arm": arm.name, "status": "cut: the time budget was spent in the fresh process"}
    if proc.returncode != 0 or not out.exists():
        return {"arm": arm.name, "status": f"failed (exit {proc.returncode}): {proc.stderr[-500:]}"}
    return json.loads(out.read_text()) | {"process_s": time.monotonic() - t0}


def child(args) -> None:
    """`--child ARM --state DIR`: one arm in this fresh process, for run_fresh."""
    import torch

    state = Path(args.state)
    saved = json.loads((state / "args.json").read_text())
    for key, value in saved.items():
        if key not in ("child", "state"):
            setattr(args, key, value)
    arm = next(a for a in ARMS if a.name == args.child)
    from ftenv.selfcheck import tinymodel

    tiny = tinymodel.paths(saved["tiny_root"])
    model = build_model(tiny, state / "child-model", *sizes(args), args.dtype).to(args.device)
    initial = copy.deepcopy(model.state_dict())
    batches, val, eager = torch.load(state / "batches.pt", weights_only=False)
    r = run_arm(model, initial, arm, batches, val, args, state / "caches", math.inf, eager)
    (state / f"{arm.name}.json").write_text(json.dumps(r | {"fresh_process": True}))


def run_matrix(args) -> dict:
    """Every arm in order past its gate, on one model and one set of batches; the JSON
    (`args.json`) rewritten complete after every arm, so that a kill keeps what ran."""
    import torch

    from ftenv.selfcheck import tinymodel
    from ftenv.trainer.fastpath import buckets

    start = time.monotonic()
    deadline = start + args.budget_s
    with tempfile.TemporaryDirectory(prefix="ftenv-compile-bench-") as tmp:
        work = Path(tmp)
        say("building the offline data (ftenv tinymodel) ...")
        tiny = tinymodel.build(work / "tiny", n_train=args.train_items)
        dataset, items = tiny_items(tiny)
        batches = random_batches(dataset, items, args.steps, args.seed, args.min_batch, args.max_batch)
        val = random_batches(
            dataset, items, VALIDATION_BATCHES, args.seed + 1, args.min_batch, args.max_batch
        )
        layers = {"llm": args.llm_layers, "encoder": args.encoder_blocks} if not args.tiny_model else "tiny"
        say(f"building the model ({layers}) ...")
        args.dtype = "bf16" if args.device == "cuda" else "fp32"  # bf16 as the recipe trains; fp32 on a CPU
        model = build_model(tiny, work / "model", *sizes(args), args.dtype).to(args.device)
        initial = copy.deepcopy(model.state_dict())
        start_s = time.monotonic() - start  # what a fresh process spends before its first step
        shapes = [tuple(b["input_ids"].shape) for b in batches]
        head = {
            "partial": True,
            "gpu": torch.cuda.get_device_name()
            if args.device == "cuda"
            else "CPU (a code path check, not a measurement)",
            "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
            "fix": variables.given(variables.SDPA_DEPRIORITIZED),
            "backend": args.backend,
            "steps": args.steps,
            "warmup": args.warmup,
            "layers": layers,
            "shapes": buckets.distinct_shapes(shapes),
            "bucketed_shapes": buckets.distinct_shapes(shapes, buckets.parse(FINE_BUCKETS)),
            "buckets": FINE_BUCKETS,
        }
        arms: list[dict] = []
        done: dict[str, dict] = {}
        for arm in ARMS:
            if args.only and arm.name != "eager" and arm.name not in args.only:
                continue
            left = deadline - time.monotonic()
            why = refusal(arm, done, args.steps, left, start_s)
            if "cudagraphs" in arm.parts and args.device != "cuda":
                why = "skipped: CUDA graphs need a CUDA GPU"
            if arm.cache_of and arm.cache_of not in done and not why:
                why = f"not run: {arm.cache_of}, whose caches it starts on, did not run"
            if why:
                r = {"arm": arm.name, "parts": list(arm.parts), "status": why}
            elif arm.profile_of:
                name = best_name(done) if arm.profile_of == "best" else arm.profile_of
                of = next((a for a in ARMS if a.name == name), None)
                say(f"arm {arm.name} (profiling {name}) ...")
                r = (
                    run_profile(model, initial, arm, of, batches, args, work / "caches")
                    if of
                    else {"arm": arm.name, "status": "not run: no compiled arm ran with eager's losses"}
                )
            elif arm.fresh_process:
                say(f"arm {arm.name} (a fresh process) ...")
                state = work
                (state / "args.json").write_text(json.dumps(vars(args) | {"tiny_root": str(tiny.root)}))
                torch.save((batches, val, done.get("eager")), state / "batches.pt")
                r = run_fresh(arm, state, args, left)
            else:
                say(f"arm {arm.name} ...")
                r = run_arm(
                    model, initial, arm, batches, val, args, work / "caches", deadline, done.get("eager")
                )
            arms.append(r)
            done[arm.name] = r
            if args.json:  # complete after every arm: a kill keeps what ran
                Path(args.json).write_text(json.dumps(summary(head, arms), indent=2))
        return summary(head | {"partial": False, "wall_s": time.monotonic() - start}, arms)
