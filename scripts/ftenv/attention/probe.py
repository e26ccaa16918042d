"""`ftenv probe`: what one new attention shape costs, measured (first call minus second on shapes
new to the process), under the current settings and with cuDNN attention forced first. Without a
GPU it says so and exits 0.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from dataclasses import dataclass

from ftenv import text, variables
from ftenv.attention import facts, sdpa

#: (batch, padded length) per mode: distinct, so that one mode never reuses the other's plans.
SHAPES = {
    "current": [(3, 203), (5, 331), (2, 459)],
    "cudnn-first": [(3, 205), (5, 333), (2, 461)],
}
WARMUP_SHAPE = {"current": (1, 67), "cudnn-first": (1, 69)}


def _inputs(torch, shape, device, dtype, heads, head_dim):
    b, t = shape
    g = torch.Generator(device="cpu").manual_seed(b * 1000 + t)
    q, k, v = (
        torch.randn(b, heads, t, head_dim, generator=g, dtype=torch.float32)
        .to(device, dtype)
        .requires_grad_()
        for _ in range(3)
    )
    valid = torch.ones(b, t, dtype=torch.bool)
    for i in range(b):  # right padding, every item but the first shorter
        valid[i, t - (t * i) // (2 * b) :] = i == 0
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    mask = (causal[None, None] & valid[:, None, None, :]).to(device)
    return q, k, v, mask


def _choice(torch, q, k, v, mask) -> str:
    try:  # private API: guarded
        return sdpa.backend_name(int(torch._fused_sdp_choice(q, k, v, attn_mask=mask)))
    except Exception:
        return "unknown"


def measure_shape(torch, shape, device, dtype, heads, head_dim) -> dict:
    F = torch.nn.functional
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    q, k, v, mask = _inputs(torch, shape, device, dtype, heads, head_dim)
    row = {"batch": shape[0], "padded_len": shape[1], "backend": _choice(torch, q, k, v, mask)}
    for call in (1, 2):
        sync()
        t0 = time.perf_counter()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        sync()
        t1 = time.perf_counter()
        out.backward(torch.ones_like(out))
        sync()
        t2 = time.perf_counter()
        row[f"fwd{call}"], row[f"bwd{call}"] = t1 - t0, t2 - t1
        q.grad = k.grad = v.grad = None
    row["fwd_cost"] = row["fwd1"] - row["fwd2"]
    row["bwd_cost"] = row["bwd1"] - row["bwd2"]
    row["cost"] = row["fwd_cost"] + row["bwd_cost"]
    return row


def _mode_context(torch, mode):
    if mode == "current":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    order = [
        SDPBackend.CUDNN_ATTENTION,
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.MATH,
    ]
    return sdpa_kernel(order, set_priority=True)


def probe(device: str = "cuda", heads: int = facts.LLM_HEADS, head_dim: int = facts.LLM_HEAD_DIM) -> dict:
    import torch

    dtype = torch.bfloat16
    modes = ["current", "cudnn-first"] if device == "cuda" else ["current"]
    result = {**facts.read_stack(device).as_dict(), "heads": heads, "head_dim": head_dim, "modes": {}}
    for mode in modes:
        with _mode_context(torch, mode):
            measure_shape(torch, WARMUP_SHAPE[mode], device, dtype, heads, head_dim)
            rows = [measure_shape(torch, s, device, dtype, heads, head_dim) for s in SHAPES[mode]]
        result["modes"][mode] = {
            "rows": rows,
            "median_cost": statistics.median(r["cost"] for r in rows),
            "median_fwd_cost": statistics.median(r["fwd_cost"] for r in rows),
            "median_bwd_cost": statistics.median(r["bwd_cost"] for r in rows),
        }
    return result


def render(r: dict) -> str:
    where = f"{r['gpu']} ({r['sm']})" if r.get("gpu") else r["device"]
    raw = variables.given(variables.SDPA_DEPRIORITIZED, r)
    lines = [
        f"== ftenv probe: padded-mask bf16 attention ({r['heads']} heads x {r['head_dim']}), "
        "first vs second call per new shape ==",
        f"{where}; torch {r['torch']}, cuDNN {sdpa.cudnn_name(r['cudnn'])}, "
        f"{text.assignment(variables.SDPA_DEPRIORITIZED, raw)}",
        f"{'mode':<12} {'B x T':>9} {'backend':<10} {'fwd 1st':>8} {'fwd 2nd':>8} {'bwd 1st':>8} "
        f"{'bwd 2nd':>8} {'new-shape cost':>14}",
    ]
    for mode, m in r["modes"].items():
        for row in m["rows"]:
            lines.append(
                f"{mode:<12} {row['batch']:>3} x {row['padded_len']:<3} {row['backend']:<10} "
                f"{row['fwd1']:>8.4f} {row['fwd2']:>8.4f} {row['bwd1']:>8.4f} {row['bwd2']:>8.4f} "
                f"{row['cost']:>12.4f} s"
            )
    costs = ", ".join(
        f"{mode} {m['median_cost']:.4f} s (fwd {m['median_fwd_cost']:.4f} + bwd {m['median_bwd_cost']:.4f})"
        for mode, m in r["modes"].items()
    )
    lines.append(f"median per-new-shape cost: {costs}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ProbeOptions:
    """What `ftenv probe` was asked for (ftenv.commands.probe)."""

    device: str = "auto"  # auto, cuda or cpu
    json: bool = False


def run(options: ProbeOptions) -> int:
    import torch

    device = options.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else None
    if device is None:
        msg = (
            "ftenv probe: no CUDA GPU visible, skipped (it times cuDNN attention plan builds, which "
            "happen only on a GPU; `--device cpu` tries the machinery on the CPU)"
        )
        print(json.dumps({"skipped": msg}) if options.json else msg)
        return 0
    result = probe(device)
    print(json.dumps(result, indent=2) if options.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(run(ProbeOptions(json="--json" in sys.argv)))
