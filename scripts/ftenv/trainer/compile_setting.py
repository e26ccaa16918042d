"""FTENV_COMPILE, FTENV_BUCKETS, FTENV_COMPILE_CACHE_DIR: the one home of the compile setting (its
parse, its defaults, the variables it gives the trainer), since the launcher sets it, the trainer
entry acts on it and the start-up report prints it (the parts: docs/compile.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from ftenv import text, variables
from ftenv.trainer.fastpath import buckets as bucketing

PARTS = ("decoder", "regional", "audio", "audiowhole", "cudagraphs", "nosync", "lmhead", "audiocache")
#: What `--compile` / FTENV_COMPILE=1 turns on, chosen on the CPU proxies until a GPU measures the
#: matrix (docs/benchmarks.md): it meets the proxies' targets with eager's losses and no CUDA
#: graphs (so any batch shape and gradient accumulation), and compiles one layer, not the stack.
DEFAULT_PARTS = ("regional", "audio", "nosync", "lmhead")
#: FunASR's gradient accumulation setting (trainer_ds.Trainer: accum_grad, default 1).
ACCUM_GRAD = "train_conf.accum_grad"
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


def read(environ=None) -> tuple[tuple[str, ...], bucketing.Buckets | None]:
    """(the compile parts, the buckets FTENV_BUCKETS asks for: None when unset) of the setting;
    ValueError names the fix."""
    spec = variables.given(variables.BUCKETS, environ)
    return compile_parts(environ), bucketing.parse(spec) if spec else None


def requested(
    environ: Mapping[str, str], compile: bool = False, parts: str | None = None, spec: str | None = None
) -> dict[str, str]:
    """The environment with the command line's choice over it: `--compile-parts` over `--compile`
    over FTENV_COMPILE, `--buckets` over FTENV_BUCKETS."""
    wanted = dict(environ)
    if parts:
        wanted[variables.COMPILE] = parts
    elif compile:
        wanted[variables.COMPILE] = "1"
    if spec:
        wanted[variables.BUCKETS] = spec
    return wanted


def check_accumulation(parts, accumulation: int) -> None:
    """CUDA graphs and gradient accumulation exclude each other (ValueError names the fix)."""
    if "cudagraphs" in parts and accumulation > 1:
        raise ValueError(
            f"CUDA graphs with gradient accumulation ({ACCUM_GRAD}={accumulation}): each forward "
            "starts a new graph step and reuses the previous forward's output buffers, which the "
            "accumulated backward still needs; drop `cudagraphs` from --compile-parts or set "
            f"++{ACCUM_GRAD}=1"
        )


def cache_mount(environ=None) -> str | None:
    """FTENV_COMPILE_CACHE_DIR: the compile caches' mount (None: under the output dir)."""
    return variables.given(variables.COMPILE_CACHE_DIR, environ) or None


def trainer_env(wanted: Mapping[str, str], caches: Mapping[str, str]) -> dict[str, str]:
    """The variables the setting gives the trainer: FTENV_COMPILE and the compile caches when a part
    is on, FTENV_BUCKETS when set (`wanted` already read without error)."""
    env: dict[str, str] = {}
    if compile_parts(wanted):
        env[variables.COMPILE] = variables.read(variables.COMPILE, wanted)
        env.update(caches)
    if variables.given(variables.BUCKETS, wanted):
        env[variables.BUCKETS] = variables.given(variables.BUCKETS, wanted)
    return env


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
