"""The opt-in compiled decoder forward (`ftenv finetune --compile`, FTENV_COMPILE=1).

After the cuDNN plan stall is gone (FunASR issue #3704), a Fun-ASR-Nano fine-tuning step is bound by
the CPU launching thousands of small kernels of the Qwen3 decoder. FunASR PR #3705 (upstream, not in
the funasr wheel these images pin) compiles the decoder stack, `llm.model.forward`, with
`torch.compile(dynamic=True)`. This module gives the pinned funasr the same, at run time, without
touching site-packages:

- `install(model)` replaces `model.llm.model.forward` on that one instance with a `Switch`, which
  decides per call: inputs on an allowed device (CUDA unless told otherwise) with more than one
  sequence go through the compiled forward; everything else (CPU training, 1-sequence batches)
  runs the original eager forward. A batch of 1 would specialise the graph and recompile, and on
  the CPU that recompile hits an Inductor C++ code generation error in torch 2.11: upstream keeps
  it eager too.
- `install_on_build()` makes every FunASR model built in this process get the switch (the trainer
  entry ftenv.train.funasr_entry calls it when FTENV_COMPILE=1), and turns on Dynamo's recompile
  log lines, which the watchdog reads to name recompilation as the cause of a slow step.
- Upstream also runs the decoder under `sdpa_kernel([flash, efficient, math])`; here the image's
  TORCH_CUDNN_SDPA_DEPRIORITIZED=1 keeps cuDNN attention out of the front instead, which also
  holds when a compiled graph picks its attention kernel while it is traced.
- `graphs_compiled()` counts the graphs Dynamo has compiled (torch._dynamo's counters, private:
  None when they are gone), so that callers can count recompiles over new shapes.
"""

from __future__ import annotations

import atexit
import functools
import sys

from ftenv.report.compile_setting import ENV

#: Devices whose inputs take the compiled forward in training (upstream: CUDA only).
TRAIN_DEVICES = ("cuda",)


def _lead_tensor(args, kwargs):
    for name in ("inputs_embeds", "input_ids"):
        if kwargs.get(name) is not None:
            return kwargs[name]
    return args[0] if args else None


class Switch:
    """Callable that stands in for the decoder stack's forward: compiled or eager, per call."""

    def __init__(self, eager, devices=TRAIN_DEVICES, dynamic: bool | None = True, backend: str = "inductor"):
        import torch

        self.eager = eager
        self.devices = tuple(devices)
        self.dynamic = dynamic
        self.compiled = torch.compile(eager, dynamic=dynamic, backend=backend)
        self.calls = {"compiled": 0, "eager": 0}
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
        if self.use_compiled(_lead_tensor(args, kwargs)):
            self.calls["compiled"] += 1
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
            "Fun-ASR-Nano (FunASRNano); turn it off (unset FTENV_COMPILE, drop --compile)"
        )
    return decoder


def install(model, devices=TRAIN_DEVICES, dynamic: bool | None = True) -> Switch:
    """Put a Switch on this model's decoder stack (this instance only); returns it."""
    decoder = decoder_of(model)
    current = decoder.forward
    if isinstance(current, Switch):
        return current
    switch = Switch(current, devices=devices, dynamic=dynamic)
    decoder.forward = switch  # an instance attribute: nn.Module.__call__ finds it first
    return switch


def uninstall(model) -> None:
    decoder = decoder_of(model)
    if isinstance(decoder.forward, Switch):
        del decoder.forward


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


_installed: list[Switch] = []


def _say_calls() -> None:
    """At exit: how many decoder calls went each way, so that a log shows what really ran."""
    for switch in _installed:
        print(
            f"ftenv: compiled decoder: {switch.calls['compiled']} calls compiled, {switch.calls['eager']} "
            f"eager (compiled: {'/'.join(switch.devices)} inputs with 2+ sequences); "
            f"graphs compiled: {graphs_compiled()}",
            file=sys.stderr,
            flush=True,
        )


def install_on_build(devices=TRAIN_DEVICES) -> str:
    """Give every model FunASR's AutoModel builds in this process the compiled decoder forward.

    FunASR's trainer (funasr/bin/train_ds.py) builds its model through `AutoModel`, whose
    `build_model` returns (model, kwargs); wrapping that one function reaches the model whichever
    model class the config names (packaged or remote code). Returns a line for the log."""
    from funasr.auto.auto_model import AutoModel

    original = AutoModel.build_model
    if getattr(original, "ftenv_compiled_decoder", False):
        return "compiled decoder forward already installed"

    @functools.wraps(original)
    def build_model(*args, **kwargs):
        model, conf = original(*args, **kwargs)
        try:
            _installed.append(install(model, devices=devices))
        except TypeError as exc:  # not a Fun-ASR-Nano: train it eager, and say so
            print(f"ftenv: {ENV}: {exc}; this model runs eager", file=sys.stderr, flush=True)
            return model, conf
        print(
            f"ftenv: compiled decoder forward installed on {type(model).__name__}.llm.model "
            f"(torch.compile dynamic=True; {'/'.join(devices)} batches of 2+ sequences compiled, "
            "the rest eager)",
            file=sys.stderr,
            flush=True,
        )
        return model, conf

    build_model.ftenv_compiled_decoder = True
    AutoModel.build_model = staticmethod(build_model)
    atexit.register(_say_calls)
    logs = "with recompile log lines" if log_recompiles() else "recompile log lines unavailable"
    return f"{ENV}=1: the decoder forward of the model to be built will be compiled ({logs})"
