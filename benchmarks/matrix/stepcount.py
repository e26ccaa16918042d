"""What a training step's ATen ops and host syncs are: one definition, counted by one function
(`count_arm`) for the matrix's floor and for benchmarks/dispatch_proxy.py, so that the two can
never report different things under the same name (docs/benchmarks.md, "what a step's syncs and
ops are").

A step's counts are those of the model's forward and backward on one batch already on the device,
dispatched outside compiled regions, as a TorchDispatchMode sees them (after autograd and the
composite ops' decompositions: what reaches a kernel). The update (gradient clipping, AdamW,
zero_grad) is counted apart; the trainer's reads for its log (the loss's `.item()`, the
statistics'), the validation pass and the first `warm` steps are not counted. A compiled region's
ops are not counted whatever backend the arm trains with: its graphs are traced to ATen graphs
that run with the counting mode set aside (a CUDA-graph arm is counted without its graphs: the
regions are the same).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses

from benchmarks.matrix.arms import Arm
from benchmarks.matrix.model import applied, prepared
from ftenv.trainer.recipe_step import fresh, optimizer, update

#: Ops the host waits on: their result's value or size is read on the CPU (`.item()` and
#: tensor-bounded slices are `_local_scalar_dense`; `repeat_interleave` with tensor repeats).
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::repeat_interleave")
#: Indexing with a boolean mask turns the mask into indices first (a nonzero: a sync on a GPU).
MASK_INDEX_OPS = ("aten::index", "aten::index_put_", "aten::index_put")


def graph_breaks() -> int | None:
    """Dynamo's graph breaks since its counters were cleared (private: None when unknown)."""
    try:
        from torch._dynamo.utils import counters

        return int(sum(counters["graph_break"].values()))
    except Exception:
        return None


def region_backend():
    """AOTAutograd over the eager ATen graphs, forward and backward run with the counting mode set
    aside: a compiled region's ops are not counted (private modules: count_arm guards)."""
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


def is_sync(func, args) -> bool:
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
            if is_sync(func, args):
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


def count_arm(model, initial, arm: Arm, batches, device: str = "cpu", warm: int = 1) -> dict:
    """The arm's counts per step over `batches` (as its collator gives them), the first `warm`
    steps left out: ops and syncs of forward and backward, the update's apart, graph breaks and the
    compiled regions called."""
    parts = tuple(p for p in arm.parts if p != "cudagraphs")
    try:
        backend, counting = region_backend(), op_counter()
    except Exception as exc:  # private modules gone: the counts are unknown, the run goes on
        return {"parts": list(parts), "counts": f"unknown ({type(exc).__name__}: {exc})"}
    step, upd, syncs = collections.Counter(), collections.Counter(), collections.Counter()
    batches = prepared(arm, batches)
    with applied(model, initial, dataclasses.replace(arm, parts=parts), device, backend) as done:
        for switch in done["switches"]:
            set_mode_aside(switch)
        optim = optimizer(model, arm.fused)
        model.train()
        for i, batch in enumerate(batches):
            inputs = fresh(batch, device)
            counted = i >= warm  # the first steps (lazy initialisations) are not counted
            with counting() if counted else contextlib.nullcontext() as c:
                loss, _stats, _weight = model(**inputs)
                loss.backward()
            with counting() if counted else contextlib.nullcontext() as o:
                update(model, optim)
            if counted:
                step.update(c.n)
                syncs.update(c.sync_names)
                upd.update(o.n)
    n = max(len(batches) - warm, 1)
    compiled = sum(s.calls["compiled"] for s in done["switches"])
    return {
        "parts": list(parts),
        "steps": n,
        "rows": [int(b["input_ids"].shape[0]) for b in batches[warm:]],
        "compiled_calls": compiled,
        "regions_per_step": compiled / len(batches),
        "ops_per_step": step["ops"] / n,
        "non_view_ops_per_step": step["non_view_ops"] / n,
        "host_syncs_per_step": step["syncs"] / n,
        "sync_ops": {k: v / n for k, v in syncs.items()},
        "optimizer_ops_per_step": upd["ops"] / n,
        "optimizer_syncs_per_step": upd["syncs"] / n,
        "graph_breaks": graph_breaks(),
    }
