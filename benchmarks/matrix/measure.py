"""How an arm's steps are measured: the recipe's training step timed with the device synced (the
trainer's log reads and a validation pass included, as FunASR's trainer runs them), and the
profiler pass that gives the floor its GPU facts (kernels and GPU-busy seconds per step)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ftenv.trainer.recipe_step import fresh, optimizer, set_backends, update

#: The CUDA runtime calls that make the host wait for the device.
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


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


def validate(model, batches: list[dict], device: str) -> list[float]:
    """FunASR's validation: eval mode, no_grad, the model's loss per batch."""
    import torch

    model.eval()
    losses = []
    with torch.no_grad():
        for batch in batches:
            loss, _stats, _weight = model(**fresh(batch, device))
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
    """The recipe's step (forward, backward, the update: clip, AdamW), each timed with the GPU
    synced, with the trainer's per-step loss `.item()` and, every `log_interval` steps, its log
    line's `.item()` of every statistic; a validation pass (not timed) after step `val_at`. Stops
    at the deadline."""
    import torch

    from ftenv.trainer.fastpath.compiled_decoder import graphs_compiled

    torch.manual_seed(0)
    set_backends()
    model.train()
    optim = optimizer(model, fused)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = Trained([], [], [], [], (None, None))
    for i, batch in enumerate(batches):
        if time.monotonic() > deadline:
            break
        on_host = fresh(batch, "cpu")
        sync()
        t0 = time.perf_counter()
        loss, stats, _weight = model(**fresh(on_host, device))
        loss.backward()
        update(model, optim)
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
    """One step to warm up, then a profiler pass over `batches` as train_steps runs them: per step,
    kernels (device events but copies, fills and annotations), GPU-busy seconds (every device
    event's time, copies included) and the CUDA runtime's synchronising calls; on a CUDA GPU only
    (None on a CPU). A step's ATen ops and host syncs are not the profiler's: stepcount.count_arm."""
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
    on_gpu = device == "cuda"
    return {
        "steps": n,
        "kernels_per_step": len(kernels) / n if on_gpu else None,
        "gpu_busy_s_per_step": sum(e.device_time_total for e in on_device) / 1e6 / n if on_gpu else None,
        # The waits themselves over the whole timed step (an `.item()` is an op and a stream sync).
        "cuda_sync_calls_per_step": sum(1 for e in events if e.name in SYNC_CALLS) / n if on_gpu else None,
    }
