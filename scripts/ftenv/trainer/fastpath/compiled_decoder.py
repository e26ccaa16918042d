"""The compiled decoder forward (`--compile-parts decoder` or `regional`; FunASR PR #3705's idea on
the pinned funasr, put on one model instance at run time), because a Fun-ASR-Nano step without the
cuDNN plan stall is bound by the CPU launching the Qwen3 decoder's small kernels (docs/compile.md).
"""

from __future__ import annotations

import functools

from ftenv import variables

#: Devices whose inputs take the compiled forward in training (upstream: CUDA only).
TRAIN_DEVICES = ("cuda",)


def _lead_tensor(args, kwargs):
    for name in ("inputs_embeds", "input_ids", "hidden_states"):
        if kwargs.get(name) is not None:
            return kwargs[name]
    return args[0] if args else None


class Switch:
    """Callable that stands in for a forward: compiled or eager, per call.

    `graphs_when(lead)`, when given, picks the calls that run the CUDA-graph variant of the same
    compile (`mode="reduce-overhead"`): the bucketed shapes (ftenv.trainer.fastpath.buckets), so that the
    graphs recorded stay as few as the buckets. Other shapes run compiled without graphs."""

    def __init__(
        self,
        eager,
        devices=TRAIN_DEVICES,
        dynamic: bool | None = True,
        backend: str = "inductor",
        graphs_when=None,
    ):
        import torch

        self.eager = eager
        self.devices = tuple(devices)
        self.dynamic = dynamic
        self.compiled = torch.compile(eager, dynamic=dynamic, backend=backend)
        self.graphs_when = graphs_when
        self.graphed = None
        if graphs_when is not None:
            self.graphed = torch.compile(eager, dynamic=dynamic, backend=backend, mode="reduce-overhead")
        self.calls = {"compiled": 0, "eager": 0}
        self.graphed_calls = 0
        functools.update_wrapper(self, eager)

    def use_compiled(self, lead) -> bool:
        """Compiled for a batch of more than one sequence on an allowed device; else eager."""
        return (
            lead is not None
            and getattr(lead, "ndim", 0) >= 2
            and lead.shape[0] > 1
            and lead.device.type in self.devices
        )

    def __call__(self, *args, **kwargs):
        lead = _lead_tensor(args, kwargs)
        if self.use_compiled(lead):
            self.calls["compiled"] += 1
            if self.graphed is not None and self.graphs_when(lead):
                self.graphed_calls += 1
                return self.graphed(*args, **kwargs)
            return self.compiled(*args, **kwargs)
        self.calls["eager"] += 1
        return self.eager(*args, **kwargs)


def decoder_of(model):
    """The decoder stack whose forward is compiled: FunASRNano's `llm.model` (a Qwen3Model)."""
    llm = getattr(model, "llm", None)
    decoder = getattr(llm, "model", None)
    if decoder is None or not callable(getattr(decoder, "forward", None)):
        raise TypeError(
            f"{type(model).__name__} has no `llm.model` decoder stack: the compiled forward is for "
            f"Fun-ASR-Nano (FunASRNano); turn it off (unset {variables.COMPILE}, drop --compile)"
        )
    return decoder


def without_kv_cache(forward):
    """`forward` with use_cache=False whenever the caller left it unset, in training and in
    evaluation (FunASRNano's training and validation forwards call the LLM without it; generation
    passes use_cache explicitly)."""

    @functools.wraps(forward)
    def forward_without_cache(*args, **kwargs):
        if kwargs.get("use_cache") is None:
            kwargs["use_cache"] = False
        return forward(*args, **kwargs)

    forward_without_cache.ftenv_no_cache = True
    return forward_without_cache


def switch_on(module, forward, **switch) -> Switch:
    """The module's Switch (this instance only): the one already there, else a new one over
    `forward`; `switch` goes to the Switch (devices, dynamic, backend, graphs_when)."""
    current = module.__dict__.get("forward")
    if not isinstance(current, Switch):
        current = Switch(forward, **switch)
        module.forward = current  # an instance attribute: nn.Module.__call__ finds it first
    return current


def install(model, devices=TRAIN_DEVICES, dynamic: bool | None = True, **switch) -> Switch:
    """Put a Switch on this model's decoder stack, the stack without a KV cache unless asked for;
    returns it. `switch` goes to the Switch (backend, graphs_when)."""
    decoder = decoder_of(model)
    return switch_on(decoder, without_kv_cache(decoder.forward), devices=devices, dynamic=dynamic, **switch)


def install_regional(model, devices=TRAIN_DEVICES, dynamic: bool | None = True, **switch) -> list[Switch]:
    """A Switch on each decoder layer, the stack without a KV cache unless asked for; returns the
    switches."""
    decoder = decoder_of(model)
    layers = _layers(decoder)
    if not getattr(decoder.forward, "ftenv_no_cache", False):
        decoder.forward = without_kv_cache(decoder.forward)
    return [switch_on(layer, layer.forward, devices=devices, dynamic=dynamic, **switch) for layer in layers]


def _layers(decoder) -> list:
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise TypeError(f"{type(decoder).__name__} has no `layers`: regional compilation needs them")
    return list(layers)


def uninstall(model) -> None:
    decoder = decoder_of(model)
    decoder.__dict__.pop("forward", None)
    for layer in getattr(decoder, "layers", None) or []:
        layer.__dict__.pop("forward", None)


def graphs_compiled() -> int | None:
    """Graphs Dynamo compiled in this process so far (one per compile or recompile of a frame);
    None when the private counter is not there."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:
        return None


def log_recompiles() -> bool:
    """Turn on Dynamo's "Recompiling function ..." log lines (TORCH_LOGS=recompiles); False when
    this torch has no such switch."""
    try:
        import torch._logging

        torch._logging.set_logs(recompiles=True)
        return True
    except Exception:
        return False
