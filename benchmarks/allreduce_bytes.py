#!/usr/bin/env python3
"""Bytes all-reduced per training step for a Fun-ASR-Nano model folder, frozen as upstream's recipe
freezes it (audio encoder and adaptor frozen, the LLM trained), and what moving them costs between
nodes at 25 / 100 / 400 Gb/s per node against a measured step time.

DDP all-reduces every trainable parameter's gradient once per step, in the parameter's dtype (the
LLM is cast to its llm_dtype, bf16 in the recipe). A ring all-reduce across n nodes moves 2(n-1)/n
of those bytes through each node's network. The model is built on the meta device from the folder's
config.yaml and its LLM's config.json: nothing is loaded or allocated, so the real 0.6B model counts
in seconds on any machine.

    python benchmarks/allreduce_bytes.py MODEL_DIR [--llm-config config.json] [--step-s 0.1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

from ftenv import outcome  # noqa: E402

RATES_GBIT = (25, 100, 400)
NODES = (1, 2, 4)
#: One B200 step with the fix (FunASR issue #3704); docs/gpu-results.md has the H200's.
STEP_S = 0.1


def _value(text: str):
    return {"true": True, "false": False}.get(text, text)


def recipe_config(model_dir: Path, llm_config: Path | None = None) -> dict:
    """The folder's config.yaml with the recipe's freeze settings applied (ftenv.launch.recipe) and
    the LLM's config path resolved against the folder; `llm_config` replaces the LLM's config.json."""
    import yaml

    from ftenv.launch.recipe import RECIPE_DEFAULTS

    conf = yaml.safe_load((model_dir / "config.yaml").read_text())
    for key, value in RECIPE_DEFAULTS:
        part, _, name = key.partition(".")
        if name.endswith("freeze"):
            conf.setdefault(part, {})[name] = _value(value)
    llm_conf = conf["llm_conf"]
    llm_path = Path(llm_conf["init_param_path"])
    if not llm_path.is_absolute() and (model_dir / llm_path).exists():
        llm_path = model_dir / llm_path
    if llm_config is not None:
        copy = Path(tempfile.mkdtemp(prefix="allreduce-llm-"))
        shutil.copy(llm_config, copy / "config.json")
        llm_path = copy
    llm_conf["init_param_path"] = str(llm_path)
    return conf


def trainable(conf: dict) -> dict:
    """Parameters and gradient bytes per part, built on the meta device."""
    import torch

    from ftenv.selfcheck.tinymodel import quiet_funasr_import

    tables = quiet_funasr_import()
    model_class = tables.model_classes[conf["model"]]
    kwargs = {k: v for k, v in conf.items() if k != "model"}
    with torch.device("meta"):
        model = model_class(**kwargs, **conf.get("model_conf", {}))
    parts: dict[str, dict] = {}
    for name, p in model.named_parameters():
        part = parts.setdefault(
            name.split(".", 1)[0], {"params": 0, "trainable": 0, "bytes": 0, "dtype": set()}
        )
        part["params"] += p.numel()
        if p.requires_grad:
            part["trainable"] += p.numel()
            part["bytes"] += p.numel() * p.element_size()
            part["dtype"].add(str(p.dtype).removeprefix("torch."))
    for part in parts.values():
        part["dtype"] = sorted(part["dtype"])
    return {
        "parts": parts,
        "trainable_params": sum(p["trainable"] for p in parts.values()),
        "allreduce_bytes": sum(p["bytes"] for p in parts.values()),
    }


def ring_seconds(nbytes: int, nodes: int, gbit_per_s: float) -> float:
    """A ring all-reduce's time on the network alone: 2(n-1)/n of the bytes through each node's link."""
    return 0.0 if nodes <= 1 else 2 * (nodes - 1) / nodes * nbytes / (gbit_per_s * 1e9 / 8)


def table(nbytes: int, step_s: float, rates=RATES_GBIT, nodes=NODES) -> list[dict]:
    """Per node count and rate: the all-reduce time, and the step's time if nothing overlaps it
    (DDP overlaps buckets with the backward pass, so the truth lies between step_s and this)."""
    rows = []
    for n in nodes:
        for rate in rates:
            t = ring_seconds(nbytes, n, rate)
            rows.append(
                {
                    "nodes": n,
                    "gbit_per_s": rate,
                    "allreduce_s": t,
                    "share_of_step": t / step_s,
                    "step_s_no_overlap": step_s + t,
                    "samples_per_s_vs_one_node": n * step_s / (step_s + t),
                }
            )
    return rows


def render(result: dict, rows: list[dict], step_s: float) -> str:
    parts = ", ".join(
        f"{name} {v['trainable']:,} {'/'.join(v['dtype']) or '-'}" for name, v in result["parts"].items()
    )
    out = [
        f"trainable parameters: {result['trainable_params']:,} ({parts})",
        f"all-reduced per step: {result['allreduce_bytes'] / 1e9:.3f} GB; step time {step_s:g} s",
        "nodes  Gb/s/node  all-reduce s  x step  step s (no overlap)  speed-up vs 1 node",
    ]
    for r in rows:
        out.append(
            f"{r['nodes']:>5}  {r['gbit_per_s']:>9}  {r['allreduce_s']:>12.3f}  {r['share_of_step']:>6.2f}  "
            f"{r['step_s_no_overlap']:>19.3f}  {r['samples_per_s_vs_one_node']:>18.2f}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "model_dir", type=Path, help="a Fun-ASR-Nano folder (config.yaml, the LLM's config.json)"
    )
    parser.add_argument(
        "--llm-config", type=Path, help="count with this LLM config.json instead of the folder's"
    )
    parser.add_argument("--step-s", type=float, default=STEP_S, help=f"measured step time (default {STEP_S})")
    parser.add_argument("--json", type=Path, help="write the numbers here too")
    args = parser.parse_args(argv)
    if not (args.model_dir / "config.yaml").is_file():
        print(
            f"allreduce_bytes: {args.model_dir}/config.yaml not found: give a Fun-ASR-Nano model folder",
            file=sys.stderr,
        )
        return outcome.UNUSABLE
    result = trainable(recipe_config(args.model_dir, args.llm_config))
    rows = table(result["allreduce_bytes"], args.step_s)
    print(render(result, rows, args.step_s))
    if args.json:
        args.json.write_text(json.dumps({**result, "step_s": args.step_s, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
