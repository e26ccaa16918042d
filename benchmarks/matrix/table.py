"""The matrix's result: the JSON as it stands after each arm (`summary`) and its table (`render`),
the floor's row with its counts by the one definition (benchmarks.matrix.stepcount)."""

from __future__ import annotations

from benchmarks.matrix.arms import best_arm, measured


def _cell(value, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def render(out: dict) -> str:
    done = {r["arm"]: r for r in out["arms"]}
    eager = measured(done, "eager")
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
                f"{_cell(r.get('ops_per_step'), '.0f')} "
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
