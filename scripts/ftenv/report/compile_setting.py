"""FTENV_COMPILE, FTENV_BUCKETS, FTENV_COMPILE_CACHE_DIR: what the faster training path turns on
(`ftenv finetune --compile`, `--compile-parts`, `--buckets`).

The one home of the variables' names, of the compile parts and of how their values read; the
report prints them, the trainer entry (ftenv.train.funasr_entry) acts on them through
ftenv.train.fastpath.parts, the launcher (ftenv.train.launch_plan) sets them.

FTENV_COMPILE is `1` (on: DEFAULT_PARTS), `0` (off), or a comma-separated list of PARTS:
- `decoder`: the Qwen3 decoder stack compiled whole, FunASR PR #3705's path;
- `regional`: each Qwen3 decoder layer compiled instead (one graph for all layers, less compile);
- `audio`: the frozen SenseVoice encoder's blocks and the adaptor compiled too;
- `audiowhole`: the encoder and the adaptor compiled as one region instead (with `decoder`: two
  regions a step); FunASRNano's forward then runs without host syncs (as `nosync`);
- `cudagraphs`: CUDA graphs (mode="reduce-overhead") for the bucketed shapes; needs FTENV_BUCKETS;
- `nosync`: FunASRNano's forward without host syncs (ftenv.train.fastpath.sync_free), eager;
- `lmhead`: that forward with the LM head and the loss over labelled positions only
  (ftenv.train.fastpath.labelled_head).
Every compiled decoder runs without a KV cache (use_cache=False), in training and validation.
"""

from __future__ import annotations

import os

from ftenv import text

ENV = "FTENV_COMPILE"
BUCKETS_ENV = "FTENV_BUCKETS"
CACHE_ENV = "FTENV_COMPILE_CACHE_DIR"
PARTS = ("decoder", "regional", "audio", "audiowhole", "cudagraphs", "nosync", "lmhead")
#: What `--compile` / FTENV_COMPILE=1 turns on, chosen on the CPU proxies until a GPU measures the
#: matrix (docs/benchmarks.md): it meets the proxies' targets with eager's losses and no CUDA
#: graphs (so any batch shape and gradient accumulation), and compiles one layer, not the stack.
DEFAULT_PARTS = ("regional", "audio", "nosync", "lmhead")
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def _fix() -> str:
    return f"set {ENV}=1 (on) or {ENV}=0 (off), or a comma-separated list of parts: {', '.join(PARTS)}"


def compile_parts(environ=os.environ) -> tuple[str, ...]:
    """The compile parts FTENV_COMPILE asks for (empty: off); a value that is not understood is
    an error that names the fix, not a silent default."""
    raw = environ.get(ENV, "").strip().lower()
    if raw in _ON:
        return DEFAULT_PARTS
    if raw in _OFF:
        return ()
    parts = tuple(p.strip() for p in raw.split(",") if p.strip())
    if any(p not in PARTS for p in parts):
        raise ValueError(f"{ENV}={environ.get(ENV)!r} is not understood: {_fix()}")
    if "decoder" in parts and "regional" in parts:
        raise ValueError(
            f"{ENV}={environ.get(ENV)!r}: `decoder` (the whole stack) and `regional` (per layer) "
            "exclude each other: choose one"
        )
    if "audio" in parts and "audiowhole" in parts:
        raise ValueError(
            f"{ENV}={environ.get(ENV)!r}: `audio` (per block) and `audiowhole` (one region) "
            "exclude each other: choose one"
        )
    if "cudagraphs" in parts and not environ.get(BUCKETS_ENV):
        raise ValueError(
            f"{ENV}={environ.get(ENV)!r}: CUDA graphs need few shapes: set {BUCKETS_ENV} too "
            "(ftenv finetune --buckets 64)"
        )
    return tuple(p for p in PARTS if p in parts)


def report_line(environ=os.environ) -> str:
    raw = environ.get(ENV)
    try:
        parts = compile_parts(environ)
        state = f"on: {', '.join(parts)} (GPU batches of 2+)" if parts else "off"
    except ValueError as exc:
        state = f"off ({exc})"
    buckets = environ.get(BUCKETS_ENV)
    extra = f"; {text.assignment(BUCKETS_ENV, buckets)}" if buckets else ""
    return f"compile {state} ({text.assignment(ENV, raw)}{extra}; ftenv finetune --compile)"
