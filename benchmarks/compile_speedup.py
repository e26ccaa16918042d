#!/usr/bin/env python3
"""GPU benchmark: Fun-ASR-Nano fine-tune steps, eager vs the compiled decoder forward (`--compile`).

The tiny self-check model is far too small to show a launch-bound step, so this builds, offline and
with random weights, a model with Fun-ASR-Nano's real dimensions: FunASR's packaged FunASRNano
with the SenseVoice-Small audio encoder (512 wide, 50 + 20 SAN-M blocks) and the 2-layer
Transformer adaptor, both frozen as in the recipe, and a Qwen3 LLM of Qwen3-0.6B's size (28
layers, hidden 1024, 16/8 heads, head_dim 128) with Qwen3's vocabulary (151,936) in bf16. The
audio and text come from the tiny offline data (`ftenv tinymodel`), batched at random sizes so
that (batch, padded length) changes from step to step as with the recipe's token batching.

Both runs train the same batches, one after the other, in one process, with
TORCH_CUDNN_SDPA_DEPRIORITIZED=1 (the image's fix; "eager + the variable" in FunASR issue #3704):
first eager, then with ftenv.train.compiled_decoder installed (torch.compile dynamic=True, as
`ftenv finetune --compile` does). Printed per run: mean step (all steps), steady step (after the
warm-up), the first step (compile time for the compiled run), recompiles after the first compile,
and peak GPU memory. Target (recorded in docs/benchmarks.md, not a test): compiled mean step
<= 0.70x the eager mean (FunASR PR #3705: 0.068 s vs 0.100 s on a B200). Runs in a few minutes on
one H200. Without a GPU it says so and exits 0.

    python benchmarks/compile_speedup.py [--steps 80] [--warmup 10] [--json out.json]
"""

from __future__ import annotations

import argparse
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


def say(text: str) -> None:
    print(f"compile_speedup: {text}", file=sys.stderr, flush=True)


def build_model(tiny, workdir: Path, llm_layers: int, encoder_blocks: int, llm_dtype: str = "bf16"):
    """FunASRNano at Fun-ASR-Nano's sizes, random weights, built from local files only."""
    import torch

    from ftenv.selfcheck import tinymodel

    llm_dir = workdir / "qwen3-0.6b-sized"
    llm_dir.mkdir(parents=True, exist_ok=True)
    llm = {**tinymodel.LLM_CONFIG, **QWEN3_0_6B, "num_hidden_layers": llm_layers}
    (llm_dir / "config.json").write_text(json.dumps(llm, indent=2))
    conf = tinymodel.model_config(tiny)
    conf["audio_encoder_conf"].update(ENCODER, num_blocks=encoder_blocks)
    conf["audio_adaptor_conf"].update(ADAPTOR)
    conf["llm_conf"]["init_param_path"] = str(llm_dir)
    conf["llm_conf"]["llm_dtype"] = llm_dtype
    tables = tinymodel.quiet_funasr_import()
    frontend = tables.frontend_classes.get(conf["frontend"])(**conf["frontend_conf"])
    torch.manual_seed(0)
    model = tables.model_classes.get(conf["model"])(input_size=frontend.output_size(), **conf)
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


def measure(model, batches, warmup: int, compiled: bool, device: str) -> dict:
    import torch

    from ftenv.selfcheck.loop import train
    from ftenv.train import compiled_decoder

    gpu = device == "cuda"
    switch = compiled_decoder.install(model, devices=(device,)) if compiled else None
    graphs: list[int | None] = []
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    seconds, losses = train(
        model, batches, device, after_step=lambda: graphs.append(compiled_decoder.graphs_compiled())
    )
    wall = time.perf_counter() - t0
    if switch is not None:
        compiled_decoder.uninstall(model)
    known = bool(graphs) and None not in graphs
    return {
        "mode": "compiled" if compiled else "eager",
        "steps": len(seconds),
        "mean_step_s": statistics.fmean(seconds),
        "steady_step_s": statistics.fmean(seconds[warmup:]),
        "steady_median_s": statistics.median(seconds[warmup:]),
        "first_step_s": seconds[0],
        "recompiles": (graphs[-1] - graphs[0]) if known and compiled else None,
        "compiled_calls": switch.calls["compiled"] if switch else 0,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if gpu else float("nan"),
        "wall_s": wall,
        "loss_first_last": [losses[0], losses[-1]],
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the steady mean (default 10)")
    p.add_argument("--min-batch", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the results here too")
    # Smaller stacks, and the CPU, only to check this script's code path (not a measurement). On
    # the CPU with torch 2.11, Inductor's C++ code generation fails at these widths ("'tmp2' was
    # not declared"): the CPU check gets through the eager run and into the compile only.
    p.add_argument("--llm-layers", type=int, default=QWEN3_0_6B["num_hidden_layers"], help=argparse.SUPPRESS)
    p.add_argument("--encoder-blocks", type=int, default=ENCODER["num_blocks"], help=argparse.SUPPRESS)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "compile_speedup: no CUDA GPU visible: this benchmark measures GPU step times; on a CPU, "
            "`ftenv selfcheck --compile` checks recompiles and numerics instead"
        )
        return 0
    from ftenv.selfcheck import tinymodel

    with tempfile.TemporaryDirectory(prefix="ftenv-compile-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        say("building the offline data (ftenv tinymodel) ...")
        tiny = tinymodel.build(work / "tiny", n_train=256)
        dataset, items = tiny_items(tiny)
        batches = random_batches(dataset, items, args.steps, args.seed, args.min_batch, args.max_batch)
        layers = {"llm": args.llm_layers, "encoder": args.encoder_blocks}
        say(f"building the model ({layers}) ...")
        # bf16 as the recipe trains on a GPU; fp32 for the CPU code path check (bf16 is slow there).
        dtype = "bf16" if args.device == "cuda" else "fp32"
        model = build_model(tiny, work, args.llm_layers, args.encoder_blocks, dtype).to(args.device)
        setup = time.perf_counter() - t0
        runs = []
        for compiled in (False, True):
            say(f"{'compiled' if compiled else 'eager'} run: {args.steps} steps ...")
            runs.append(measure(model, batches, args.warmup, compiled, args.device))
    shapes = {tuple(b["input_ids"].shape) for b in batches}
    gpu = "CPU (a code path check, not a measurement)"
    if args.device == "cuda":
        gpu = torch.cuda.get_device_name()
    eager, compiled = runs
    fix = os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED")
    print(f"== compile_speedup: {gpu}, torch {torch.__version__}, {args.steps} steps, {len(shapes)} shapes")
    print(f"TORCH_CUDNN_SDPA_DEPRIORITIZED={fix}; layers {layers}; set-up {setup:.0f} s")
    print("| run | mean step | steady step | first step | recompiles | peak memory |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        rec = "-" if r["mode"] == "eager" else str(r["recompiles"])
        print(
            f"| {r['mode']} | {r['mean_step_s']:.4f} s | {r['steady_step_s']:.4f} s | "
            f"{r['first_step_s']:.1f} s | {rec} | {r['peak_memory_gib']:.1f} GiB |"
        )
    ratio_mean = compiled["mean_step_s"] / eager["mean_step_s"]
    ratio_steady = compiled["steady_step_s"] / eager["steady_step_s"]
    print(
        f"compiled / eager: mean {ratio_mean:.2f}x, steady {ratio_steady:.2f}x (target mean <= 0.70x); "
        f"compile time ~{compiled['first_step_s'] - eager['steady_median_s']:.1f} s"
    )
    if args.json:
        out = {"gpu": gpu, "torch": torch.__version__, "shapes": len(shapes), "layers": layers, "runs": runs}
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
