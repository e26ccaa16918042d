#!/usr/bin/env python3
"""CPU proxies of a GPU step, per arm of the compile matrix: ATen ops dispatched outside compiled
regions, host syncs and graph breaks per training step, at Fun-ASR-Nano's depth.

On a GPU nearly every ATen op that runs eager is one or more kernel launches, and a launch-bound
step (FunASR issue #3704: about 8,080 kernels a step on a B200) is paced by how many there are and
by how often the host waits for the device. Neither count depends on the layers' widths, so this
builds FunASRNano with Fun-ASR-Nano's depth (28 Qwen3 layers, 1 + 49 + 20 SAN-M blocks, the 2-layer
adaptor), the real vocabulary (151,936) and narrow widths, on the CPU, and counts with a
TorchDispatchMode over training steps (forward and backward; the optimizer counted apart):

- ops: every ATen op dispatched outside compiled regions (and the non-view ones). The compiled
  regions run with the mode set aside (with a TorchDispatchMode active, Dynamo would run them
  eager), their forward and backward graphs through AOTAutograd with the eager ATen graph
  (`region_backend`): on a GPU Inductor turns each into a few fused kernels, not counted here;
- host syncs: ops whose result the host must read (`_local_scalar_dense`, i.e. `.item()` and
  tensor-bounded slices; `nonzero`; `masked_select`; indexing with a boolean mask) and
  `Tensor.tolist` calls;
- graph breaks: torch._dynamo's counter (private: "unknown" when gone);
- compiled regions called per step: with `cudagraphs` on a GPU each is one graph replay forward
  (and one backward where it trains), so this is what a step would replay (CUDA graphs cannot
  run on a CPU).

    python benchmarks/dispatch_proxy.py [--steps 3] [--arms eager,regional+audio,...] [--json out.json]

`--llm-layers 2` for the arms that compile the decoder stack whole (`decoder`, `large`): nothing
inside a compiled region is counted, so the count outside does not depend on the layers inside,
and tracing 28 layers whole takes over 20 minutes on a small loaded CPU. Eager's count at the same
depth is the ratio's reference.

A proxy, not a speed: record it in docs/benchmarks.md beside upstream's 8,080 kernels.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

#: Narrow widths at Fun-ASR-Nano's depth and vocabulary (op counts do not depend on widths).
NARROW_LLM = {
    "vocab_size": 151936,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 28,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
NARROW_ENCODER = {
    "output_size": 64,
    "attention_heads": 4,
    "linear_units": 128,
    "num_blocks": 50,
    "tp_blocks": 20,
}
NARROW_ADAPTOR = {"downsample_rate": 1, "ffn_dim": 128, "n_layer": 2}
#: Ops the host waits on: their result's value or size is read on the CPU.
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::repeat_interleave")
#: Indexing with a boolean mask turns the mask into indices first (a nonzero: a sync on a GPU).
MASK_INDEX_OPS = ("aten::index", "aten::index_put_", "aten::index_put")
#: The arms counted: the matrix's candidates and the eager-side levers alone.
ARMS = {
    "eager": (),
    "nosync": ("nosync",),
    "decoder": ("decoder",),
    "decoder+nosync+lmhead": ("decoder", "nosync", "lmhead"),
    "regional": ("regional", "nosync", "lmhead"),
    "regional+audio": ("regional", "audio"),
    "regional+audio+nosync": ("regional", "audio", "nosync"),
    "best-guess": ("regional", "audio", "nosync", "lmhead"),
    "large": ("decoder", "audiowhole", "nosync", "lmhead"),
}


def region_backend():
    """AOTAutograd over the eager ATen graphs, forward and backward run with the counting mode set
    aside: a compiled region's ops are not counted (private modules: the caller guards)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    from torch.utils._python_dispatch import _disable_current_modes

    def compiler(gm, _example_inputs):
        def run(*args):
            with _disable_current_modes():
                return gm(*args)

        return make_boxed_func(run)

    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler)


def set_mode_aside(switch) -> None:
    """Enter the switch's compiled forward with the counting mode set aside (Dynamo compiles and
    runs a frame only with no TorchDispatchMode active)."""
    from torch.utils._python_dispatch import _disable_current_modes

    compiled = switch.compiled

    def run(*args, **kwargs):
        with _disable_current_modes():
            return compiled(*args, **kwargs)

    switch.compiled = run


def _load_matrix():
    spec = importlib.util.spec_from_file_location("compile_speedup", HERE / "compile_speedup.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _is_sync(func, args) -> bool:
    import torch

    name = func._schema.name
    if name in SYNC_OPS:
        return name != "aten::repeat_interleave" or any(torch.is_tensor(a) for a in args[1:2])
    if name in MASK_INDEX_OPS and len(args) > 1:
        return any(torch.is_tensor(i) and i.dtype == torch.bool for i in (args[1] or []) if i is not None)
    return False


def op_counter():
    """A context manager factory: a TorchDispatchMode that counts ops and syncs, and counts
    `Tensor.tolist` calls (they read the data without dispatching an op)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = collections.Counter()
            self.sync_names = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n["ops"] += 1
            if not func.is_view:
                self.n["non_view_ops"] += 1
            if _is_sync(func, args):
                self.n["syncs"] += 1
                self.sync_names[func._schema.name] += 1
            return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def counting():
        counter = Counter()
        original = torch.Tensor.tolist

        def tolist(self):
            counter.n["syncs"] += 1
            counter.sync_names["Tensor.tolist"] += 1
            return original(self)

        torch.Tensor.tolist = tolist
        try:
            with counter:
                yield counter
        finally:
            torch.Tensor.tolist = original

    return counting


def count_arm(model, initial, parts, batches, warm: int = 1) -> dict:
    """Per training step: ops and syncs (forward + backward), the optimizer's apart, graph breaks."""
    import torch

    from ftenv.trainer.fastpath import labelled_head
    from ftenv.trainer.fastpath.parts import apply, remove

    matrix_dynamo = torch._dynamo
    model.load_state_dict(initial)
    matrix_dynamo.reset()
    matrix_dynamo.utils.counters.clear()
    done = apply(model, parts, None, devices=("cpu",), backend=region_backend())
    for switch in done["switches"]:
        set_mode_aside(switch)
    counting = op_counter()
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=2e-4, foreach=True)
    step = collections.Counter()
    opt = collections.Counter()
    syncs = collections.Counter()
    model.train()
    try:
        for i, batch in enumerate(batches):
            fresh = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()}
            if "lmhead" in parts:
                fresh = labelled_head.add_label_index(fresh)
            counted = i >= warm  # the first step (lazy initialisations) is not counted
            with counting() if counted else contextlib.nullcontext() as c:
                loss, _stats, _w = model(**fresh)
                loss.backward()
            with counting() if counted else contextlib.nullcontext() as o:
                optim.step()
                optim.zero_grad(set_to_none=True)
            if counted:
                step.update(c.n)
                syncs.update(c.sync_names)
                opt.update(o.n)
    finally:
        remove(model, done)
    n = max(len(batches) - warm, 1)
    try:  # private: "unknown" when gone
        breaks = sum(matrix_dynamo.utils.counters["graph_break"].values())
    except Exception:
        breaks = "unknown"
    return {
        "parts": list(parts),
        "steps": n,
        "rows": [int(b["input_ids"].shape[0]) for b in batches[warm:]],
        "compiled_calls": sum(s.calls["compiled"] for s in done["switches"]),
        "regions_per_step": sum(s.calls["compiled"] for s in done["switches"]) / len(batches),
        "ops_per_step": step["ops"] / n,
        "non_view_ops_per_step": step["non_view_ops"] / n,
        "host_syncs_per_step": step["syncs"] / n,
        "sync_ops": {k: v / n for k, v in syncs.items()},
        "optimizer_ops_per_step": opt["ops"] / n,
        "optimizer_syncs_per_step": opt["syncs"] / n,
        "graph_breaks": breaks,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3, help="counted steps per arm (one more warms up)")
    p.add_argument("--min-batch", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=25)
    p.add_argument("--arms", type=lambda s: s.split(","), default=list(ARMS))
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

    matrix = _load_matrix()
    with tempfile.TemporaryDirectory(prefix="ftenv-proxy-") as tmp:
        work = Path(tmp)
        tiny = tinymodel.build(work / "tiny", n_train=64)
        dataset, items = matrix.tiny_items(tiny)
        batches = matrix.random_batches(dataset, items, args.steps + 1, 0, args.min_batch, args.max_batch)
        llm = {**NARROW_LLM, "num_hidden_layers": args.llm_layers}
        sizes = (None, None, None) if args.tiny_model else (llm, NARROW_ENCODER, NARROW_ADAPTOR)
        model = matrix.build_model(tiny, work / "model", *sizes, "fp32")
        initial = copy.deepcopy(model.state_dict())
        depth = f"{args.llm_layers} decoder layers, 70 encoder blocks, narrow widths"
        out = {"model": "tiny" if args.tiny_model else depth, "arms": {}}
        for name in args.arms:
            print(f"dispatch_proxy: {name} ...", file=sys.stderr, flush=True)
            out["arms"][name] = count_arm(model, initial, ARMS[name], batches)
            say(name, out["arms"][name])
            if args.json:  # complete after every arm: a killed run keeps what ran
                Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


def say(name: str, r: dict) -> None:
    print(
        f"{name}: {r['ops_per_step']:.0f} ATen ops outside compiled regions per step "
        f"({r['non_view_ops_per_step']:.0f} not views), {r['host_syncs_per_step']:.1f} host syncs, "
        f"{r['graph_breaks']} graph breaks, {r['regions_per_step']:.0f} compiled regions per step; "
        f"optimizer {r['optimizer_ops_per_step']:.0f} ops, {r['optimizer_syncs_per_step']:.0f} syncs; "
        f"rows {r['rows']}; syncs {r['sync_ops']}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
