"""What FTENV_COMPILE and FTENV_BUCKETS put on one model, in the trainer's process and in the
benchmark, so that both apply the compile parts (ftenv.trainer.compile_setting.PARTS) the same way.
"""

from __future__ import annotations

import atexit
import functools
import sys

from ftenv import upstream, variables
from ftenv.trainer.fastpath import audio_cache, compiled_audio, compiled_decoder, sync_free
from ftenv.trainer.fastpath.compiled_decoder import TRAIN_DEVICES

#: The parts that run FunASRNano's forward without host syncs (ftenv.trainer.fastpath.sync_free).
SYNC_FREE_PARTS = frozenset({"nosync", "lmhead", "audiowhole", "audiocache"})


def refused(parts, buckets=None) -> list[str]:
    """Why the fast path is not installed ([] when it may be): a line for each upstream function it
    rests on that is not the source it was written from (ftenv.upstream); the run then trains with
    upstream's code alone, as without the compile setting."""
    hooks = [upstream.MODEL_BUILD]
    if buckets is not None or {"lmhead", "audiocache"} & set(parts):
        hooks.append(upstream.COLLATOR)
    if SYNC_FREE_PARTS & set(parts):
        hooks.append(upstream.SYNC_FREE)
    if buckets is not None or {"audio", "audiowhole"} & set(parts):
        hooks.append(upstream.ADAPTOR_MASK)
    return [line for hook in hooks if (line := upstream.refusal(hook))]


def cuda_graphs_unavailable(devices=TRAIN_DEVICES) -> str | None:
    """Why CUDA graphs cannot run here (None: they can)."""
    if "cuda" not in devices:
        return "CUDA graphs are for CUDA inputs only: compiled without graphs"
    try:
        import torch

        if not torch.cuda.is_available():
            return "no CUDA GPU: compiled without CUDA graphs"
        from torch.compiler import cudagraph_mark_step_begin  # noqa: F401
    except Exception as exc:  # a torch without the API
        return f"CUDA graphs unavailable ({type(exc).__name__}: {exc}): compiled without graphs"
    return None


def _mark_step_begin(_module, _args):
    import torch

    torch.compiler.cudagraph_mark_step_begin()


def apply(model, parts, buckets=None, devices=TRAIN_DEVICES, backend: str = "inductor") -> dict:
    """Put the compile parts on this model; returns {"switches", "notes", "hooks"} (the hooks'
    handles, for a caller that takes the parts off again)."""
    notes: list[str] = []
    hooks = []
    graphs_when = None
    if "cudagraphs" in parts:
        why_not = cuda_graphs_unavailable(devices)
        if why_not or buckets is None:
            notes.append(why_not or "CUDA graphs need buckets: compiled without graphs")
        else:
            graphs_when = buckets.holds_lead
            hooks.append(model.register_forward_pre_hook(_mark_step_begin))
            notes.append(
                f"CUDA graphs for the buckets {buckets.spec()}, compiled without graphs outside them"
            )
    switch = {"devices": devices, "backend": backend, "graphs_when": graphs_when}
    switches = []
    if "decoder" in parts:
        switches.append(compiled_decoder.install(model, **switch))
    if "regional" in parts:
        switches += compiled_decoder.install_regional(model, **switch)
    if "audio" in parts:
        switches += compiled_audio.install(model, **switch)
    elif "audiowhole" in parts:
        switches.append(compiled_audio.install_whole(model, **switch))
    elif buckets is not None:
        compiled_audio.install_adaptor_forward(model)
    if "audiocache" in parts:
        audio_cache.install(model)
        notes.append(
            "audiocache: the frozen audio encoder runs in eval mode (no dropout) and its outputs are "
            f"kept on the device, up to {audio_cache.CACHE_BYTES >> 30} GiB, for later epochs"
        )
    if SYNC_FREE_PARTS & set(parts):
        why_not = sync_free.install(model, labelled="lmhead" in parts)
        notes += [why_not] if why_not else []
    return {"switches": switches, "notes": notes, "hooks": hooks}


def remove(model, done: dict) -> None:
    """Take off what `apply` put on (the benchmark trains several arms on one model)."""
    for hook in done["hooks"]:
        hook.remove()
    sync_free.remove(model)
    audio_cache.remove(model)
    compiled_decoder.uninstall(model)
    compiled_audio.uninstall(model)


def calls_line(switches) -> str:
    compiled = sum(s.calls["compiled"] for s in switches)
    eager = sum(s.calls["eager"] for s in switches)
    graphed = sum(s.graphed_calls for s in switches)
    return (
        f"{compiled} calls compiled ({graphed} with CUDA graphs), {eager} eager, over {len(switches)} "
        f"compiled regions; graphs compiled: {compiled_decoder.graphs_compiled()}"
    )


_installed: list = []


def _say_calls() -> None:
    """At exit: how many calls went each way, so that a log shows what really ran."""
    if _installed:
        print(f"ftenv: compiled: {calls_line(_installed)}", file=sys.stderr, flush=True)


def install_on_build(parts, buckets=None, devices=TRAIN_DEVICES) -> str:
    """Give every model FunASR's AutoModel builds in this process the compile parts.

    FunASR's trainer (funasr/bin/train_ds.py) builds its model through `AutoModel`, whose
    `build_model` returns (model, kwargs); wrapping that one function reaches the model whichever
    model class the config names (packaged or remote code). Returns a line for the log."""
    from funasr.auto.auto_model import AutoModel

    original = AutoModel.build_model
    if getattr(original, "ftenv_fast_path", False):
        return "compile parts already installed"

    @functools.wraps(original)
    def build_model(*args, **kwargs):
        model, conf = original(*args, **kwargs)
        try:
            done = apply(model, parts, buckets, devices)
        except TypeError as exc:  # not a Fun-ASR-Nano: train it eager, and say so
            print(f"ftenv: {variables.COMPILE}: {exc}; this model runs eager", file=sys.stderr, flush=True)
            return model, conf
        _installed.extend(done["switches"])
        for note in done["notes"]:
            print(f"ftenv: {note}", file=sys.stderr, flush=True)
        what = (
            f"compiled {', '.join(parts)} installed on {type(model).__name__} (torch.compile "
            f"dynamic=True; {'/'.join(devices)} batches of 2+ sequences compiled, the rest eager; no KV "
            "cache)"
            if parts
            else f"the adaptor's device-side padding mask installed on {type(model).__name__} (bucketing)"
        )
        print(f"ftenv: {what}", file=sys.stderr, flush=True)
        return model, conf

    build_model.ftenv_fast_path = True
    AutoModel.build_model = staticmethod(build_model)
    atexit.register(_say_calls)
    logs = (
        "with recompile log lines" if compiled_decoder.log_recompiles() else "recompile log lines unavailable"
    )
    if not parts:
        return "bucketing: the model to be built gets the adaptor's device-side padding mask"
    return f"{variables.COMPILE}={','.join(parts)}: the model to be built gets the compiled parts ({logs})"
