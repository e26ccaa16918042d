"""The GPU kit's step for `ftenv eval`'s batched decoding: its own module, so that the list of steps
(gpu_steps) stays one screen of what runs."""

from __future__ import annotations

import sys

from imagetools.gpukit.gpu_run import NO_GPU, Context, Result, ended, json_tail, run_logged

#: The eval's batched decoding against upstream's one-at-a-time path, in one run. The kit carries the
#: tiny model only (the real weights are far over what a GPU machine is lent to carry): this measures
#: the code path's ratio and hypotheses on the GPU; the real model's target is in docs/benchmarks.md.
BATCHED_DECODE_SCRIPT = "benchmarks/batched_decode.py"
BATCHED_DECODE_ARGS = (
    "--device",
    "cuda",
    "--utterances",
    "32",
    "--batch-size",
    "16",
    "--max-new-tokens",
    "24",
)


def step_batched_decode(ctx: Context) -> Result:
    """`ftenv eval`'s batched decoding beside upstream's one-at-a-time path on the GPU, same utterances:
    utterances per second of each and whether every hypothesis is the same, token for token."""
    if not ctx.gpu:
        return Result("batched-decode", NO_GPU, NO_GPU)
    r = Result("batched-decode", "equal hypotheses on every utterance; batched faster than upstream's path")
    cmd = [sys.executable, BATCHED_DECODE_SCRIPT, *BATCHED_DECODE_ARGS, "--json", "/dev/stdout"]
    rc, output = run_logged(ctx, r.step, cmd, 150)
    data = json_tail(output)
    n, equal, speedup = data.get("utterances"), data.get("equal_hypotheses"), data.get("speedup")
    r.ok = rc == 0 and n is not None and equal == n and isinstance(speedup, float) and speedup > 1
    r.got = f"{speedup:.2f}x upstream, {equal}/{n} equal hypotheses" if n else ended(rc, output)
    r.data = {
        k: data.get(k)
        for k in ("utterances", "equal_hypotheses", "speedup", "upstream_utt_per_s", "batched_utt_per_s")
    } | {"llm_dtype": data.get("llm_dtype"), "gpu": data.get("gpu")}
    return r
