#!/usr/bin/env python3
"""GPU benchmark matrix: Fun-ASR-Nano fine-tune steps, eager against each lever of the fast path.

The tiny self-check model is far too small to show a launch-bound step, so this builds, offline and
with random weights, a model with Fun-ASR-Nano's real dimensions: FunASR's packaged FunASRNano
with the SenseVoice-Small audio encoder (512 wide, 50 + 20 SAN-M blocks) and the 2-layer
Transformer adaptor, both frozen as in the recipe, and a Qwen3 LLM of Qwen3-0.6B's size (28
layers, hidden 1024, 16/8 heads, head_dim 128) with Qwen3's vocabulary (151,936) in bf16. The
audio and text come from the tiny offline data (`ftenv tinymodel`), batched at random sizes so
that (batch, padded length) changes from step to step as with the recipe's token batching.
Dropout is set to 0 so that the loss differences measure numerics only.

Every arm trains the same seeded batches from the same initial weights, with a validation pass
(eval mode, no_grad, as FunASR's trainer validates) half-way, under
TORCH_CUDNN_SDPA_DEPRIORITIZED=1 (the image's fix; "eager + the variable" in FunASR issue #3704).
The arms run in this order, so that what is unknown comes first (ARMS):

    eager                    the reference
    floor-eager              a profiler pass over eager steps: kernels, GPU-busy s, host syncs
    best-guess               the combination expected fastest (regional decoder, compiled audio
                             side, no host syncs, LM head over labelled positions), cold
    regional+audio+nosync,   the same compiled regions without a lever (on best-guess's caches)
    regional+audio
    floor-best               the profiler pass over the best arm so far: its GPU-busy s is the floor
    warm                     best-guess again in a FRESH process on the caches best-guess wrote
    large+buckets+graphs     few large regions (decoder stack whole, audio side whole) with CUDA
                             graphs over finer buckets: about two graph replays a step, cold
    large                    the same regions without graphs (and without buckets), cold
    +buckets                 best-guess over the finer buckets, no graphs: padding waste alone
    decoder                  FunASR PR #3705's path (its ratio is published), cold
    the rest                 upstream's path with the levers, per-layer CUDA graphs, fused
                             AdamW, log interval, the frozen encoder's outputs cached
                             (`+audiocache`: hits only where the steps repeat an utterance; its
                             losses differ from eager's by the encoder's dropout, off there)

Per arm: steady step (mean after the warm-up steps, the ranking), first step, compile seconds (the
first step's excess over a steady step), break-even steps against eager, recompiles in training
and graphs added by the validation pass, graph breaks, CUDA graph records, peak GPU memory, the
largest relative loss difference from eager (training and validation). The best arm is the
fastest steady step among compiled arms with eager's losses; x-eager is its steady step over
eager's. Each arm starts only if its own estimate fits in what is left of `--budget-s` (a cold
compile's prior or a measured one, a warm start's seconds, its steps at the steady step measured);
the JSON is rewritten complete after every arm. Targets: docs/benchmarks.md (not tests).
`--device cpu --tiny-model --backend aot_eager` runs the code path on a CPU (a smoke test, not a
measurement; the CUDA-graph arm skips).

    python benchmarks/compile_speedup.py [--steps 40] [--warmup 10] [--json out.json]

Long because the matrix, its arms, its gate and its table belong together: split, each part would
need the others' arm list.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

#: Qwen3-0.6B's published dimensions (its config.json), random weights.
QWEN3_0_6B = {
    "vocab_size": 151936,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 40960,
}
#: Fun-ASR-Nano's audio encoder (SenseVoice-Small) and adaptor sizes.
ENCODER = {"output_size": 512, "attention_heads": 4, "linear_units": 2048, "num_blocks": 50, "tp_blocks": 20}
ADAPTOR = {"downsample_rate": 1, "ffn_dim": 2048, "n_layer": 2}


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


#: The combination expected fastest: every lever that changes no compiled region's graph rides on
#: the regional decoder and the compiled audio side.
BEST_GUESS = ("regional", "audio", "nosync", "lmhead")
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
#: A profiled step runs slower than a plain one (the profiler records every launch).
PROFILER_SLOWDOWN = 3.0
#: Steps of a profiler pass and of the fresh-process warm start.
PROFILE_STEPS = 5
WARM_STEPS = 8
#: An arm starts only when its estimate times this fits in what is left (a first step cannot be
#: cut short, and an arm killed mid-compile leaves nothing).
START_SAFETY = 1.25
#: The validation pass: this many batches, after this fraction of the training steps.
VALIDATION_BATCHES = 3
VALIDATE_AFTER = 0.5
#: ATen ops that make the host wait for the device (their result's size or value is needed on the
#: CPU), and the CUDA runtime calls that do.
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::is_nonzero")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def say(text: str) -> None:
    print(f"compile_speedup: {text}", file=sys.stderr, flush=True)


# --- the gate and the ranking (pure: tests call them) ----------------------------------------------


def _ran(done: dict, name: str | None) -> dict | None:
    r = done.get(name) if name else None
    return r if r and "steady_step_s" in r else None


def compile_estimate(arm: Arm, done: dict) -> float:
    """Seconds the arm's first step will spend compiling: measured on an arm with the same parts
    (cold) or on any warm start, else the priors."""
    if not arm.parts and arm.profile_of is None:
        return 0.0
    if arm.profile_of is not None or (arm.cache_of and _ran(done, arm.cache_of)):
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
    profiles or starts from, else eager's), and a fresh process's start."""
    source = _ran(done, arm.profile_of if arm.profile_of != "best" else best_name(done))
    source = source or _ran(done, arm.cache_of) or _ran(done, "eager")
    step = source["steady_step_s"] if source else STEP_PRIOR_S
    n = PROFILE_STEPS + 1 if arm.profile_of else WARM_STEPS if arm.fresh_process else steps
    slowdown = PROFILER_SLOWDOWN if arm.profile_of else 1.0
    return compile_estimate(arm, done) + n * step * slowdown + (start_s if arm.fresh_process else 0.0)


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
    eager = _ran(done, "eager")
    order = ranked(done)
    if eager is None or not order:
        return None
    best = order[0]
    keys = ("arm", "steady_step_s", "first_step_s", "compile_s", "break_even_steps", "recompiles")
    return {k: best.get(k) for k in (*keys, "validation_graphs")} | {
        "x_eager": best["steady_step_s"] / eager["steady_step_s"]
    }


# --- the model and the batches -----------------------------------------------------------------


def build_model(
    tiny, workdir: Path, llm: dict | None, encoder: dict | None, adaptor: dict | None, dtype: str
):
    """FunASRNano with these LLM / encoder / adaptor settings over the tiny model's (None: the tiny
    one's), random weights from seed 0, dropout 0."""
    import torch

    from ftenv.selfcheck import tinymodel

    conf = tinymodel.model_config(tiny)
    if llm:
        llm_dir = workdir / "llm"
        llm_dir.mkdir(parents=True, exist_ok=True)
        (llm_dir / "config.json").write_text(json.dumps({**tinymodel.LLM_CONFIG, **llm}, indent=2))
        conf["llm_conf"]["init_param_path"] = str(llm_dir)
    conf["audio_encoder_conf"].update(encoder or {})
    conf["audio_adaptor_conf"].update(adaptor or {})
    conf["llm_conf"]["llm_dtype"] = dtype
    tables = tinymodel.quiet_funasr_import()
    frontend = tables.frontend_classes.get(conf["frontend"])(**conf["frontend_conf"])
    torch.manual_seed(0)
    model = tables.model_classes.get(conf["model"])(input_size=frontend.output_size(), **conf)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def sizes(args) -> tuple[dict | None, dict | None, dict | None]:
    if args.tiny_model:
        return None, None, None
    llm = {**QWEN3_0_6B, "num_hidden_layers": args.llm_layers}
    return llm, {**ENCODER, "num_blocks": args.encoder_blocks}, ADAPTOR


def tiny_items(tiny):
    """The tiny data's items, through FunASR's own dataset class (its frontend and tokenizer)."""
    from ftenv.selfcheck import tinymodel

    os.environ.update(tinymodel.OFFLINE_ENV)
    from funasr import AutoModel

    tables = tinymodel.quiet_funasr_import()
    am = AutoModel(model=str(tiny.root), device="cpu", disable_update=True, disable_log=True)
    kw = am.kwargs
    dataset = tables.dataset_classes.get(kw.get("dataset", "FunASR"))(
        str(tiny.train_jsonl),
        frontend=kw["frontend"],
        tokenizer=kw["tokenizer"],
        is_training=True,
        **dict(kw.get("dataset_conf", {})),
    )
    return dataset, [dataset[i] for i in range(len(dataset))]


def random_batches(dataset, items, n: int, seed: int, min_batch: int, max_batch: int) -> list[dict]:
    rng = random.Random(seed)
    batches = []
    for _ in range(n):
        batch = dataset.collator(rng.sample(items, rng.randint(min_batch, max_batch)))
        batch.pop("item", None)
        batches.append(batch)
    return batches


# --- one arm ----------------------------------------------------------------------------------


def cudagraph_records() -> int | None:
    """CUDA graphs recorded by Inductor's graph trees on device 0 (private: None when unknown)."""
    try:
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.get_container(0).tree_manager
        if manager is None:
            return 0
        return int(repr(manager.graph_counter).strip("count()"))
    except Exception:
        return None


def graph_breaks() -> int | None:
    try:
        from torch._dynamo.utils import counters

        return int(sum(counters["graph_break"].values()))
    except Exception:
        return None


def _fresh(batch: dict, device: str):
    import torch
    from funasr.train_utils.device_funcs import to_device

    # The model edits its inputs in place (negative ids, pads): give it a fresh copy.
    return to_device({k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()}, device)


def validate(model, batches: list[dict], device: str) -> list[float]:
    """FunASR's validation: eval mode, no_grad, the model's loss per batch."""
    import torch

    model.eval()
    losses = []
    with torch.no_grad():
        for batch in batches:
            loss, _stats, _weight = model(**_fresh(batch, device))
            losses.append(float(loss))
    model.train()
    return losses


@dataclass
class Trained:
    seconds: list[float]
    losses: list[float]
    val_losses: list[float]
    graphs: list  # graphs compiled after each step
    graphs_around_validation: tuple  # (before, after)


def train_steps(
    model, batches, device, *, fused=False, deadline=math.inf, log_interval=1, val=None, val_at=None
):
    """The recipe's step (forward, backward, clip, AdamW), each timed with the GPU synced, with the
    trainer's per-step loss `.item()` and, every `log_interval` steps, its log line's `.item()` of
    every statistic; a validation pass (not timed) after step `val_at`. Stops at the deadline."""
    import torch

    from ftenv.trainer.fastpath.compiled_decoder import graphs_compiled

    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = True
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=2e-4, **({"fused": True} if fused else {}))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = Trained([], [], [], [], (None, None))
    for i, batch in enumerate(batches):
        if time.monotonic() > deadline:
            break
        fresh = _fresh(batch, "cpu")
        sync()
        t0 = time.perf_counter()
        loss, stats, _weight = model(**_fresh(fresh, device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
        optim.step()
        optim.zero_grad(set_to_none=True)
        out.losses.append(float(loss.detach()))
        if (i + 1) % log_interval == 0:  # Trainer.log: one `.item()`, one sync, per statistic
            for value in stats.values():
                if torch.is_tensor(value):
                    value.detach().cpu().item()
        sync()
        out.seconds.append(time.perf_counter() - t0)
        out.graphs.append(graphs_compiled())
        if val and i + 1 == val_at:
            before = graphs_compiled()
            out.val_losses = validate(model, val, device)
            out.graphs_around_validation = (before, graphs_compiled())
    return out


def profile_steps(model, batches, device: str, fused: bool) -> dict:
    """One step to warm up, then a profiler pass over `batches`: per step, kernels (device events
    but copies, fills and annotations) and GPU-busy seconds (every device event's time, copies
    included; CUDA only), host syncs (on CUDA the runtime's synchronising calls; on a CPU the ATen
    ops that would sync) and ATen ops the CPU ran."""
    from torch.profiler import ProfilerActivity, profile

    train_steps(model, batches[:1], device, fused=fused)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        train_steps(model, batches[1:], device, fused=fused)
    n = len(batches) - 1
    events = prof.events()
    on_device = [
        e
        for e in events
        if str(getattr(e, "device_type", "")).endswith("CUDA") and not getattr(e, "is_user_annotation", False)
    ]
    kernels = [e for e in on_device if not e.name.startswith(("Memcpy", "Memset"))]
    sync_ops = sum(1 for e in events if e.name in SYNC_OPS)
    sync_calls = sum(1 for e in events if e.name in SYNC_CALLS)
    aten = sum(1 for e in events if e.name.startswith("aten::"))
    on_gpu = device == "cuda"
    return {
        "steps": n,
        "kernels_per_step": len(kernels) / n if on_gpu else None,
        "gpu_busy_s_per_step": sum(e.device_time_total for e in on_device) / 1e6 / n if on_gpu else None,
        # On a GPU the waits themselves (an `.item()` is an op and a stream sync); on a CPU the ops.
        "host_syncs_per_step": sync_calls / n if on_gpu else sync_ops / n,
        "sync_ops_per_step": sync_ops / n,
        "aten_ops_per_step": aten / n,
    }


def prepared(arm: Arm, batches: list[dict]) -> list[dict]:
    """The batches as the arm's collator gives them: padded to its buckets, with the labelled
    positions for `lmhead` and the speech fingerprints for `audiocache` (FunASR's collator adds
    them in training, ftenv.trainer.fastpath)."""
    from ftenv.trainer.fastpath import audio_cache, buckets, labelled_head

    if arm.buckets:
        spec = buckets.parse(arm.buckets)
        batches = [buckets.pad_batch(b, spec) for b in batches]
    if "lmhead" in arm.parts:
        batches = [labelled_head.add_label_index(dict(b)) for b in batches]
    if "audiocache" in arm.parts:
        batches = [audio_cache.add_speech_keys(dict(b)) for b in batches]
    return batches


def run_arm(model, initial, arm: Arm, batches, val, args, cache_root: Path, deadline: float, eager) -> dict:
    """Train the arm's steps with a validation pass half-way; its numbers (not its ranking)."""
    import torch

    from ftenv.trainer.fastpath import buckets
    from ftenv.trainer.fastpath.parts import apply as apply_parts
    from ftenv.trainer.fastpath.parts import remove as remove_parts

    result = {"arm": arm.name, **asdict(arm), "parts": list(arm.parts)}
    model.load_state_dict(initial)
    cache = cache_root / (arm.cache_of or arm.name)
    for var, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        os.environ[var] = str(cache / sub)
    torch._dynamo.reset()  # each arm compiles afresh (on another arm's caches: from disk)
    with contextlib.suppress(Exception):  # private: the counts then read "unknown"
        torch._dynamo.utils.counters.clear()
    batches, val = prepared(arm, batches), prepared(arm, val)
    spec = buckets.parse(arm.buckets) if arm.buckets else None
    done = apply_parts(model, arm.parts, spec, devices=(args.device,), backend=args.backend)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    steps = batches[: WARM_STEPS if arm.fresh_process else args.steps]
    try:
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
    finally:
        remove_parts(model, done)
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
    """The profiler pass over arm `of` (its caches warm): the floor's numbers."""
    import torch

    from ftenv.trainer.fastpath import buckets
    from ftenv.trainer.fastpath.parts import apply as apply_parts
    from ftenv.trainer.fastpath.parts import remove as remove_parts

    model.load_state_dict(initial)
    cache = cache_root / (of.cache_of or of.name)
    for var, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        os.environ[var] = str(cache / sub)
    torch._dynamo.reset()
    batches = prepared(of, batches)
    spec = buckets.parse(of.buckets) if of.buckets else None
    done = apply_parts(model, of.parts, spec, devices=(args.device,), backend=args.backend)
    try:
        numbers = profile_steps(model, batches[: PROFILE_STEPS + 1], args.device, of.fused)
    finally:
        remove_parts(model, done)
    return {"arm": arm.name, "profile_of": of.name, "parts": [], "status": "ran", **numbers}


def run_fresh(arm: Arm, state: Path, args, left_s: float) -> dict:
    """The arm in a new Python process (model built again, same seeds), on the caches in `state`."""
    out = state / f"{arm.name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", arm.name, "--state", str(state)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(left_s, 1))
    except subprocess.TimeoutExpired:
        return {"arm": arm.name, "status": "cut: the time budget was spent in the fresh process"}
    if proc.returncode != 0 or not out.exists():
        return {"arm": arm.name, "status": f"failed (exit {proc.returncode}): {proc.stderr[-500:]}"}
    return json.loads(out.read_text()) | {"process_s": time.monotonic() - t0}


def child(args) -> int:
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
    return 0


# --- the table --------------------------------------------------------------------------------


def _cell(value, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def render(out: dict) -> str:
    done = {r["arm"]: r for r in out["arms"]}
    eager = _ran(done, "eager")
    floor = out.get("floor") or {}
    lines = [
        f"== compile_speedup: {out['gpu']}, torch {out['torch']}, {out['steps']} steps, "
        f"{out['shapes']} shapes; layers {out['layers']}; backend {out['backend']}; "
        f"TORCH_CUDNN_SDPA_DEPRIORITIZED={out['fix']}",
        f"floor (GPU-busy s per step of the best arm): {_cell(floor.get('floor_s'), '.4f', ' s')}",
        "| arm | steady step | x eager | first step | compile | break-even | recompiles | val graphs "
        "| breaks | CUDA graphs | peak memory | loss vs eager | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in out["arms"]:
        if r.get("profile_of"):
            lines.append(
                f"| {r['arm']} ({r['profile_of']}) | kernels/step {_cell(r.get('kernels_per_step'), '.0f')}, "
                f"GPU-busy/step {_cell(r.get('gpu_busy_s_per_step'), '.4f', ' s')}, host syncs/step "
                f"{_cell(r.get('host_syncs_per_step'), '.1f')}, ATen ops/step "
                f"{_cell(r.get('aten_ops_per_step'), '.0f')} "
                f"| | | | | | | | | | | | {r['status']} |"
            )
            continue
        if "steady_step_s" not in r:
            lines.append(f"| {r['arm']} | - | - | - | - | - | - | - | - | - | - | - | {r['status']} |")
            continue
        ratio = r["steady_step_s"] / eager["steady_step_s"] if eager else None
        cells = [
            r["arm"],
            f"{r['steady_step_s']:.4f} s",
            _cell(ratio, ".2f"),
            f"{r['first_step_s']:.1f} s",
            f"{r['compile_s']:.1f} s",
            _cell(r.get("break_even_steps"), "d"),
            _cell(r.get("recompiles"), "d"),
            _cell(r.get("validation_graphs"), "d"),
            _cell(r.get("graph_breaks"), "d"),
            _cell(r.get("cudagraph_records"), "d"),
            _cell(r.get("peak_memory_gib"), ".1f", " GiB"),
            f"{r['loss_max_rel_diff']:.1e}",
            r["status"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(out_head: dict, arms: list[dict]) -> dict:
    """The complete result as it stands: written after every arm."""
    done = {a["arm"]: a for a in arms}
    floor = {k: done[f"floor-{k}"] for k in ("eager", "best") if f"floor-{k}" in done}
    if "best" in floor:
        floor["floor_s"] = floor["best"].get("gpu_busy_s_per_step")
    return out_head | {"arms": arms, "best": best_arm(arms), "floor": floor or None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40, help="steps per arm (default 40)")
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the steady mean (default 10)")
    p.add_argument("--min-batch", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=420, help="stop starting arms after this (default 420)")
    p.add_argument("--only", type=lambda s: s.split(","), help="these arms only (eager always runs)")
    p.add_argument("--json", help="write the results here too (rewritten after every arm)")
    # The CPU, smaller stacks and other backends only check this script's code path (no measurement).
    p.add_argument("--llm-layers", type=int, default=QWEN3_0_6B["num_hidden_layers"], help=argparse.SUPPRESS)
    p.add_argument("--encoder-blocks", type=int, default=ENCODER["num_blocks"], help=argparse.SUPPRESS)
    p.add_argument("--tiny-model", action="store_true", help=argparse.SUPPRESS)
    # The offline data's utterances (building 256 takes minutes on a small CPU; the smoke test's
    # batches of 2 or 3 need few).
    p.add_argument("--train-items", type=int, default=256, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="inductor", help=argparse.SUPPRESS)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--state", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    os.environ.setdefault("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")  # before torch is imported

    import torch

    if args.child:
        return child(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "compile_speedup: no CUDA GPU visible: this benchmark measures GPU step times; on a CPU, "
            "`--device cpu --tiny-model --backend aot_eager` checks its code path only"
        )
        return 0
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
            "fix": os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED"),
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
        out = summary(head | {"partial": False, "wall_s": time.monotonic() - start}, arms)
    print(render(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
