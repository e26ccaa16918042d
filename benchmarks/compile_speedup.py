#!/usr/bin/env python3
"""GPU benchmark matrix: Fun-ASR-Nano fine-tune steps, eager against each lever of the fast path.

The tiny self-check model is far too small to show a launch-bound step, so this builds, offline and
with random weights, a model with Fun-ASR-Nano's real dimensions: FunASR's packaged FunASRNano
with the SenseVoice-Small audio encoder (512 wide, 50 + 20 SAN-M blocks) and the 2-layer
Transformer adaptor, both frozen as in the recipe, and a Qwen3 LLM of Qwen3-0.6B's size (28
layers, hidden 1024, 16/8 heads, head_dim 128) with Qwen3's vocabulary (151,936) in bf16. The
audio and text come from the tiny offline data (`ftenv tinymodel`), batched at random sizes so
that (batch, padded length) changes from step to step as with the recipe's token batching.
Dropout is set to 0 so that the loss differences measure numerics only (a compiled dropout draws
other random numbers than eager's).

Every arm trains the same seeded batches from the same initial weights, one after the other, in
one process, with TORCH_CUDNN_SDPA_DEPRIORITIZED=1 (the image's fix; "eager + the variable" in
FunASR issue #3704); each compiled arm starts with empty Inductor and Triton caches (cold) unless
said otherwise:

    eager              the reference
    decoder            the decoder stack compiled whole (FunASR PR #3705's path; `--compile`)
    regional           each decoder layer compiled, no KV cache in training
    regional+audio     + the encoder blocks and the adaptor compiled
    +buckets+graphs    + bucketed batches and CUDA graphs over the buckets (CUDA only)
    +fused-adamw       regional+audio with torch.optim.AdamW(fused=True)
    +log_interval=50   regional+audio with the log line's per-statistic syncs every 50th step only
                       (every other arm logs every step, as the recipe does)
    warm               regional+audio again after torch._dynamo.reset(), on its caches (warm start)

The +fused-adamw and +log_interval=50 arms start on regional+audio's caches too (what they compile
is the same): their first step is a warm one; compare their steady steps.

Per arm: mean step, steady step (after the warm-up), first step (compile), recompiles after the
first step, CUDA graph records, peak GPU memory, largest relative loss difference from eager; and
a short profiler pass of the eager arm for the GPU-busy time per step (the floor no launch saving
goes below). Targets (docs/benchmarks.md, not tests): best arm mean <= 0.55x eager's (stretch
0.45x), <= 2 recompiles, losses within 1e-2 of eager's, warm first step <= 15 s, cold <= 60 s.
Arms stop when `--budget-s` is spent (the GPU kit's first call gives it 8 minutes); what did not
run says so. `--device cpu --tiny-model --backend aot_eager` runs the code path on a CPU (a
smoke test, not a measurement; the CUDA-graph arm skips).

    python benchmarks/compile_speedup.py [--steps 40] [--warmup 10] [--json out.json]

Long because the matrix, its model, its timing loop and its table belong together: split, each
part would need the others' arm list.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# The fix must be in the environment before torch is imported.
os.environ.setdefault("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")
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
#: (arm, compile parts, bucketed, fused AdamW, log interval). The CUDA-graph arm needs CUDA. The
#: recipe logs every step (log_interval=1): each logged step syncs on every statistic.
ARMS = [
    ("eager", (), False, False, 1),
    ("decoder", ("decoder",), False, False, 1),
    ("regional", ("regional",), False, False, 1),
    ("regional+audio", ("regional", "audio"), False, False, 1),
    ("+buckets+graphs", ("regional", "audio", "cudagraphs"), True, False, 1),
    ("+fused-adamw", ("regional", "audio"), False, True, 1),
    ("+log_interval=50", ("regional", "audio"), False, False, 50),
    ("warm", ("regional", "audio"), False, False, 1),
]
#: Arms that compile what regional+audio compiled and start on its caches (their first step is a
#: warm start, and costs the budget little); the others start cold.
CACHE_OF = {name: "regional+audio" for name in ("+fused-adamw", "+log_interval=50", "warm")}
DEFAULT_BUCKETS = "64"
#: An arm is not started with less than this left of the budget, nor with less than
#: COMPILE_MARGIN times the longest first step (compile) an arm has taken so far: a first step
#: cannot be cut short, and an arm killed mid-compile leaves nothing.
MIN_ARM_S = 30
COMPILE_MARGIN = 1.5


def say(text: str) -> None:
    print(f"compile_speedup: {text}", file=sys.stderr, flush=True)


def build_model(tiny, workdir: Path, llm_layers: int, encoder_blocks: int, llm_dtype: str, tiny_model: bool):
    """FunASRNano at Fun-ASR-Nano's sizes (or the tiny model's), random weights, dropout 0."""
    import torch

    from ftenv.selfcheck import tinymodel

    conf = tinymodel.model_config(tiny)
    if not tiny_model:
        llm_dir = workdir / "qwen3-0.6b-sized"
        llm_dir.mkdir(parents=True, exist_ok=True)
        llm = {**tinymodel.LLM_CONFIG, **QWEN3_0_6B, "num_hidden_layers": llm_layers}
        (llm_dir / "config.json").write_text(json.dumps(llm, indent=2))
        conf["audio_encoder_conf"].update(ENCODER, num_blocks=encoder_blocks)
        conf["audio_adaptor_conf"].update(ADAPTOR)
        conf["llm_conf"]["init_param_path"] = str(llm_dir)
    conf["llm_conf"]["llm_dtype"] = llm_dtype
    tables = tinymodel.quiet_funasr_import()
    frontend = tables.frontend_classes.get(conf["frontend"])(**conf["frontend_conf"])
    torch.manual_seed(0)
    model = tables.model_classes.get(conf["model"])(input_size=frontend.output_size(), **conf)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


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


def train_steps(model, batches, device: str, fused: bool, deadline: float, after_step=None, log_interval=1):
    """The recipe's step (forward, backward, clip, AdamW), each timed with the GPU synced, with the
    trainer's per-step loss `.item()` and, every `log_interval` steps, its log line's `.item()` of
    every statistic. Stops at the deadline. Returns (seconds, losses)."""
    import torch
    from funasr.train_utils.device_funcs import to_device

    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = True
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=2e-4, **({"fused": True} if fused else {}))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    seconds, losses = [], []
    for batch in batches:
        if time.monotonic() > deadline:
            break
        fresh = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()}
        sync()
        t0 = time.perf_counter()
        loss, stats, _weight = model(**to_device(fresh, device, non_blocking=True))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
        optim.step()
        optim.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if len(losses) % log_interval == 0:  # Trainer.log: one `.item()`, one sync, per statistic
            for value in stats.values():
                if torch.is_tensor(value):
                    value.detach().cpu().item()
        sync()
        seconds.append(time.perf_counter() - t0)
        if after_step is not None:
            after_step()
    return seconds, losses


def gpu_busy_per_step(model, batches, device: str) -> float | None:
    """Seconds of GPU kernel time per eager step (torch.profiler), over a few steps; None off CUDA."""
    if device != "cuda":
        return None
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            train_steps(model, batches, device, False, float("inf"))
        total_us = sum(e.self_device_time_total for e in prof.key_averages())
        return total_us / 1e6 / len(batches)
    except Exception as exc:
        say(f"profiler pass failed: {type(exc).__name__}: {exc}")
        return None


def run_arm(model, initial, arm, batches, args, cache_root: Path, deadline: float, eager_losses) -> dict:
    import torch

    from ftenv.train.fastpath import buckets, compiled_audio, compiled_decoder
    from ftenv.train.fastpath.parts import apply as apply_parts

    name, parts, bucketed, fused, log_interval = arm
    result = {"arm": name, "parts": list(parts), "bucketed": bucketed, "fused_adamw": fused}
    result["log_interval"] = log_interval
    if "cudagraphs" in parts and args.device != "cuda":
        return result | {"status": "skipped: CUDA graphs need a CUDA GPU"}
    if deadline - time.monotonic() < max(MIN_ARM_S, COMPILE_MARGIN * args.longest_first_step):
        return result | {"status": "not run: the time budget was spent"}
    model.load_state_dict(initial)
    cache = cache_root / CACHE_OF.get(name, name)
    for var, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        os.environ[var] = str(cache / sub)
    torch._dynamo.reset()  # each arm compiles afresh (warm: from its on-disk caches)
    spec = buckets.parse(args.buckets) if bucketed else None
    if spec is not None:
        batches = [buckets.pad_batch(b, spec) for b in batches]
    done = apply_parts(model, parts, spec, devices=(args.device,), backend=args.backend)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    graphs: list[int | None] = []
    steps = batches[: 5 if name == "warm" else args.steps]
    try:
        seconds, losses = train_steps(
            model,
            steps,
            args.device,
            fused,
            deadline,
            lambda: graphs.append(compiled_decoder.graphs_compiled()),
            log_interval,
        )
    finally:
        compiled_decoder.uninstall(model)
        compiled_audio.uninstall(model)
        for hook in done["hooks"]:
            hook.remove()
    if not seconds:
        return result | {"status": "not run: the time budget was spent"}
    known = None not in graphs
    warm = min(args.warmup, len(seconds) - 1)
    diffs = [abs(g - w) / max(abs(w), 1e-12) for g, w in zip(losses, eager_losses or losses, strict=False)]
    return result | {
        "status": "ran" if len(seconds) == len(steps) else f"cut at {len(seconds)} of {len(steps)} steps",
        "notes": done["notes"],
        "steps": len(seconds),
        "mean_step_s": statistics.fmean(seconds),
        "steady_step_s": statistics.fmean(seconds[warm:]) if warm else statistics.fmean(seconds),
        "first_step_s": seconds[0],
        "recompiles": graphs[-1] - graphs[0] if known and parts else None,
        "compiled_calls": sum(s.calls["compiled"] for s in done["switches"]),
        "cudagraph_records": cudagraph_records() if "cudagraphs" in parts else None,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else None,
        "loss_max_rel_diff": max(diffs) if eager_losses else 0.0,
        "losses": losses,
        "seconds": seconds,
    }


def best_arm(arms: list[dict]) -> dict | None:
    """The fastest compiled arm whose losses stay within the GPU loss tolerance of eager's."""
    from ftenv.selfcheck.mode_compile import LOSS_RTOL

    ran = {a["arm"]: a for a in arms if "mean_step_s" in a}
    eager = ran.pop("eager", None)
    fair = [a for a in ran.values() if a["arm"] != "warm" and a["loss_max_rel_diff"] <= LOSS_RTOL["cuda"]]
    if eager is None or not fair:
        return None
    best = min(fair, key=lambda a: a["mean_step_s"])
    return {k: best[k] for k in ("arm", "mean_step_s", "first_step_s", "recompiles")} | {
        "x_eager": best["mean_step_s"] / eager["mean_step_s"]
    }


def _cell(value, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def render(out: dict) -> str:
    eager = next((r for r in out["arms"] if r["arm"] == "eager" and "mean_step_s" in r), None)
    lines = [
        f"== compile_speedup: {out['gpu']}, torch {out['torch']}, {out['steps']} steps, "
        f"{out['shapes']} shapes ({out['bucketed_shapes']} bucketed, {out['buckets']})",
        f"TORCH_CUDNN_SDPA_DEPRIORITIZED={out['fix']}; layers {out['layers']}; backend {out['backend']}; "
        f"GPU-busy per eager step {_cell(out['gpu_busy_step_s'], '.4f', ' s')} (the floor)",
        "| arm | mean step | x eager | steady step | first step | recompiles | CUDA graphs | peak memory "
        "| loss vs eager | status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in out["arms"]:
        if "mean_step_s" not in r:
            lines.append(f"| {r['arm']} | - | - | - | - | - | - | - | - | {r['status']} |")
            continue
        ratio = r["mean_step_s"] / eager["mean_step_s"] if eager else None
        cells = [
            r["arm"],
            f"{r['mean_step_s']:.4f} s",
            _cell(ratio, ".2f"),
            f"{r['steady_step_s']:.4f} s",
            f"{r['first_step_s']:.1f} s",
            _cell(r["recompiles"], "d"),
            _cell(r["cudagraph_records"], "d"),
            _cell(r["peak_memory_gib"], ".1f", " GiB"),
            f"{r['loss_max_rel_diff']:.1e}",
            r["status"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40, help="steps per arm (default 40)")
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the steady mean (default 10)")
    p.add_argument("--min-batch", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--buckets", default=DEFAULT_BUCKETS, help=f"the bucketed arm's spec (default {DEFAULT_BUCKETS})"
    )
    p.add_argument("--budget-s", type=float, default=420, help="stop starting arms after this (default 420)")
    p.add_argument("--only", type=lambda s: s.split(","), help="these arms only (eager always runs)")
    p.add_argument("--json", help="write the results here too")
    # The CPU, smaller stacks and other backends only check this script's code path (no measurement).
    p.add_argument("--llm-layers", type=int, default=QWEN3_0_6B["num_hidden_layers"], help=argparse.SUPPRESS)
    p.add_argument("--encoder-blocks", type=int, default=ENCODER["num_blocks"], help=argparse.SUPPRESS)
    p.add_argument("--tiny-model", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", default="inductor", help=argparse.SUPPRESS)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "compile_speedup: no CUDA GPU visible: this benchmark measures GPU step times; on a CPU, "
            "`--device cpu --tiny-model --backend aot_eager` checks its code path only"
        )
        return 0
    from ftenv.selfcheck import tinymodel
    from ftenv.train.fastpath import buckets

    start = time.monotonic()
    deadline = start + args.budget_s
    with tempfile.TemporaryDirectory(prefix="ftenv-compile-bench-") as tmp:
        work = Path(tmp)
        say("building the offline data (ftenv tinymodel) ...")
        tiny = tinymodel.build(work / "tiny", n_train=256)
        dataset, items = tiny_items(tiny)
        batches = random_batches(dataset, items, args.steps, args.seed, args.min_batch, args.max_batch)
        layers = {"llm": args.llm_layers, "encoder": args.encoder_blocks} if not args.tiny_model else "tiny"
        say(f"building the model ({layers}) ...")
        dtype = "bf16" if args.device == "cuda" else "fp32"  # bf16 as the recipe trains; fp32 on a CPU
        model = build_model(tiny, work, args.llm_layers, args.encoder_blocks, dtype, args.tiny_model).to(
            args.device
        )
        initial = copy.deepcopy(model.state_dict())
        arms, eager_losses = [], None
        args.longest_first_step = 0.0
        for arm in ARMS:
            if args.only and arm[0] != "eager" and arm[0] not in args.only:
                continue
            say(f"arm {arm[0]} ...")
            r = run_arm(model, initial, arm, batches, args, work / "caches", deadline, eager_losses)
            arms.append(r)
            if arm[0] == "eager":
                eager_losses = r.get("losses")
            args.longest_first_step = max(args.longest_first_step, r.get("first_step_s", 0.0))
            if args.json:  # what ran so far survives a kill
                Path(args.json).write_text(json.dumps({"partial": True, "arms": arms}, indent=2))
        model.load_state_dict(initial)
        busy = gpu_busy_per_step(model, batches[:5], args.device) if deadline > time.monotonic() else None
    shapes = [tuple(b["input_ids"].shape) for b in batches]
    spec = buckets.parse(args.buckets)
    out = {
        "gpu": torch.cuda.get_device_name()
        if args.device == "cuda"
        else "CPU (a code path check, not a measurement)",
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
        "fix": os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED"),
        "backend": args.backend,
        "steps": args.steps,
        "layers": layers,
        "shapes": buckets.distinct_shapes(shapes),
        "bucketed_shapes": buckets.distinct_shapes(shapes, spec),
        "buckets": spec.spec(),
        "gpu_busy_step_s": busy,
        "wall_s": time.monotonic() - start,
        "arms": arms,
    }
    out["best"] = best_arm(arms)
    print(render(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
