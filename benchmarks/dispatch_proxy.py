#!/usr/bin/env python3
"""CPU proxies of a GPU step, per arm of the compile matrix: ATen ops dispatched outside compiled
regions, host syncs and graph breaks per training step, at Fun-ASR-Nano's depth.

On a GPU nearly every ATen op that runs eager is one or more kernel launches, and a launch-bound
step (FunASR issue #3704: about 8,080 kernels a step on a B200) is paced by how many there are and
by how often the host waits for the device. Neither count depends on the layers' widths, so this
builds FunASRNano with Fun-ASR-Nano's depth (28 Qwen3 layers, 1 + 49 + 20 SAN-M blocks, the 2-layer
adaptor), the real vocabulary (151,936) and narrow widths, on the CPU, and counts per training
step a step's ATen ops outside compiled regions, host syncs, graph breaks and compiled regions
called, by the one definition the matrix's floor counts by too (benchmarks.matrix.stepcount;
docs/benchmarks.md, "what a step's syncs and ops are").

    python benchmarks/dispatch_proxy.py [--steps 3] [--arms eager,regional+audio,...] [--json out.json]

`--llm-layers 2` for the arms that compile the decoder stack whole (`decoder`, `large`): nothing
inside a compiled region is counted, so the count outside does not depend on the layers inside,
and tracing 28 layers whole takes over 20 minutes on a small loaded CPU. Eager's count at the same
depth is the ratio's reference.

A proxy, not a speed: record it in docs/benchmarks.md beside upstream's 8,080 kernels.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # run by its path: the benchmarks package, ftenv

from benchmarks.matrix import arms as matrix_arms  # noqa: E402
from benchmarks.matrix.arms import Arm  # noqa: E402
from benchmarks.matrix.model import ADAPTOR, ENCODER, QWEN3_0_6B, build_model, random_batches, tiny_items  # noqa: E402
from benchmarks.matrix.stepcount import count_arm  # noqa: E402
from ftenv import outcome  # noqa: E402

#: Fun-ASR-Nano's sizes with narrow widths (op counts do not depend on widths): its depth and
#: vocabulary stay.
NARROW_LLM = {
    **QWEN3_0_6B,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
NARROW_ENCODER = {**ENCODER, "output_size": 64, "linear_units": 128}
NARROW_ADAPTOR = {**ADAPTOR, "ffn_dim": 128}
#: The arms counted: the matrix's candidates, and eager with FunASRNano's forward without host
#: syncs alone (`nosync`: what that lever gains by itself).
COUNTED = (
    "eager",
    "nosync",
    "decoder",
    "decoder+nosync+lmhead",
    "regional",
    "regional+audio",
    "regional+audio+nosync",
    "best-guess",
    "large",
)
ARMS = {a.name: a for a in (*matrix_arms.ARMS, Arm("nosync", ("nosync",))) if a.name in COUNTED}


def count(model, initial, name: str, batches) -> dict:
    """The arm's counts per step by the one definition (benchmarks.matrix.stepcount)."""
    return count_arm(model, initial, ARMS[name], batches)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3, help="counted steps per arm (one more warms up)")
    p.add_argument("--min-batch", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=25)
    p.add_argument("--arms", type=lambda s: s.split(","), default=list(COUNTED))
    p.add_argument("--tiny-model", action="store_true", help="the tiny model's sizes (tests)")
    p.add_argument(
        "--llm-layers",
        type=int,
        default=NARROW_LLM["num_hidden_layers"],
        help="decoder layers (fewer: for whole-stack arms, whose inside is not counted anyway)",
    )
    p.add_argument("--json")
    args = p.parse_args(argv)
    import copy

    from ftenv.selfcheck import tinymodel

    with tempfile.TemporaryDirectory(prefix="ftenv-proxy-") as tmp:
        work = Path(tmp)
        tiny = tinymodel.build(work / "tiny", n_train=64)
        dataset, items = tiny_items(tiny)
        batches = random_batches(dataset, items, args.steps + 1, 0, args.min_batch, args.max_batch)
        llm = {**NARROW_LLM, "num_hidden_layers": args.llm_layers}
        sizes = (None, None, None) if args.tiny_model else (llm, NARROW_ENCODER, NARROW_ADAPTOR)
        model = build_model(tiny, work / "model", *sizes, "fp32")
        initial = copy.deepcopy(model.state_dict())
        depth = f"{args.llm_layers} decoder layers, 70 encoder blocks, narrow widths"
        out = {"model": "tiny" if args.tiny_model else depth, "arms": {}}
        for name in args.arms:
            print(f"dispatch_proxy: {name} ...", file=sys.stderr, flush=True)
            out["arms"][name] = count(model, initial, name, batches)
            say(name, out["arms"][name])
            if args.json:  # complete after every arm: a killed run keeps what ran
                Path(args.json).write_text(json.dumps(out, indent=2))
    return outcome.EXIT[outcome.PASS]


def say(name: str, r: dict) -> None:
    if "counts" in r:  # the private modules the count needs are gone
        print(f"{name}: counts {r['counts']}", flush=True)
        return
    breaks = "unknown" if r["graph_breaks"] is None else r["graph_breaks"]
    print(
        f"{name}: {r['ops_per_step']:.0f} ATen ops outside compiled regions per step "
        f"({r['non_view_ops_per_step']:.0f} not views), {r['host_syncs_per_step']:.1f} host syncs, "
        f"{breaks} graph breaks, {r['regions_per_step']:.0f} compiled regions per step; "
        f"optimizer {r['optimizer_ops_per_step']:.0f} ops, {r['optimizer_syncs_per_step']:.0f} syncs; "
        f"rows {r['rows']}; syncs {r['sync_ops']}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
