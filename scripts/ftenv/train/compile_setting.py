"""FTENV_COMPILE, FTENV_BUCKETS, FTENV_COMPILE_CACHE_DIR: the one home of what the faster training
path turns on and how its values read, since the launcher sets them, the trainer entry acts on
them and the start-up report prints them (the parts: docs/finetune.md).
"""

from __future__ import annotations

from ftenv import text, variables

PARTS = ("decoder", "regional", "audio", "audiowhole", "cudagraphs", "nosync", "lmhead", "audiocache")
#: What `--compile` / FTENV_COMPILE=1 turns on, chosen on the CPU proxies until a GPU measures the
#: matrix (docs/benchmarks.md): it meets the proxies' targets with eager's losses and no CUDA
#: graphs (so any batch shape and gradient accumulation), and compiles one layer, not the stack.
DEFAULT_PARTS = ("regional", "audio", "nosync", "lmhead")
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def _fix() -> str:
    return (
        f"set {variables.COMPILE}=1 (on) or {variables.COMPILE}=0 (off), or a comma-separated list of "
        f"parts: {', '.join(PARTS)}"
    )


def compile_parts(environ=None) -> tuple[str, ...]:
    """The compile parts FTENV_COMPILE asks for (empty: off); a value that is not understood is
    an error that names the fix, not a silent default."""
    given = variables.read(variables.COMPILE, environ)
    raw = (given or "").strip().lower()
    if raw in _ON:
        return DEFAULT_PARTS
    if raw in _OFF:
        return ()
    parts = tuple(p.strip() for p in raw.split(",") if p.strip())
    if any(p not in PARTS for p in parts):
        raise ValueError(f"{variables.COMPILE}={given!r} is not understood: {_fix()}")
    if "decoder" in parts and "regional" in parts:
        raise ValueError(
            f"{variables.COMPILE}={given!r}: `decoder` (the whole stack) and "
            "`regional` (per layer) "
            "exclude each other: choose one"
        )
    if "audio" in parts and "audiowhole" in parts:
        raise ValueError(
            f"{variables.COMPILE}={given!r}: `audio` (per block) and `audiowhole` "
            "(one region) exclude each other: choose one"
        )
    if "audiocache" in parts and "audiowhole" in parts:
        raise ValueError(
            f"{variables.COMPILE}={given!r}: `audiocache` skips the encoder, "
            "`audiowhole` compiles the encoder and the adaptor as one region: choose one (`audio` "
            "compiles the encoder blocks and the adaptor and works with `audiocache`)"
        )
    if "cudagraphs" in parts and not variables.read(variables.BUCKETS, environ):
        raise ValueError(
            f"{variables.COMPILE}={given!r}: CUDA graphs need few shapes: "
            f"set {variables.BUCKETS} too "
            "(ftenv finetune --buckets 64)"
        )
    return tuple(p for p in PARTS if p in parts)


def report_line(environ=None) -> str:
    raw = variables.read(variables.COMPILE, environ)
    try:
        parts = compile_parts(environ)
        state = f"on: {', '.join(parts)} (GPU batches of 2+)" if parts else "off"
    except ValueError as exc:
        state = f"off ({exc})"
    buckets = variables.read(variables.BUCKETS, environ)
    extra = f"; {text.assignment(variables.BUCKETS, buckets)}" if buckets else ""
    return f"compile {state} ({text.assignment(variables.COMPILE, raw)}{extra}; ftenv finetune --compile)"
