#!/usr/bin/env python3
"""GPU benchmark matrix: Fun-ASR-Nano fine-tune steps, eager against each lever of the fast path.

The tiny self-check model is far too small to show a launch-bound step, so this builds, offline and
with random weights, a model with Fun-ASR-Nano's real dimensions: FunASR's packaged FunASRNano
with the SenseVoice-Small audio encoder (512 wide, 50 + 20 SAN-M blocks) and the 2-layer
Transformer adaptor, both frozen as in the recipe, and a Qwen3 LLM of Qwen3-0.6B's size (28
layers, hidden 1024, 16/8 heads, head_dim 128) with Qwen3's vocabulary (151,936) in bf16. The
audio and text come from the tiny offline data (`ftenv tinymodel`), batched at random sizes so
that (batch, padded length) changes from step to step as with the recipe's token batching.
Dropout is set to 0 so that the loss differences measure numerics only.

Every arm trains the same seeded batches from the same initial weights, with a validation pass
(eval mode, no_grad, as FunASR's trainer validates) half-way, under
TORCH_CUDNN_SDPA_DEPRIORITIZED=1 (the image's fix; "eager + the variable" in FunASR issue #3704).
The arms run in this order, so that what is unknown comes first (ARMS):

    eager                    the reference
    floor-eager              the floor's passes over eager steps: the profiler's kernels and
                             GPU-busy s, a step's ATen ops and host syncs (counted as
                             benchmarks/dispatch_proxy.py counts them: benchmarks.matrix.stepcount)
    best-guess               the combination expected fastest (regional decoder, compiled audio
                             side, no host syncs, LM head over labelled positions), cold
    regional+audio+nosync,   the same compiled regions without a lever (on best-guess's caches)
    regional+audio
    floor-best               the same passes over the best arm so far: its GPU-busy s is the floor
    warm                     best-guess again in a FRESH process on the caches best-guess wrote
    large+buckets+graphs     few large regions (decoder stack whole, audio side whole) with CUDA
                             graphs over finer buckets: about two graph replays a step, cold
    large                    the same regions without graphs (and without buckets), cold
    +buckets                 best-guess over the finer buckets, no graphs: padding waste alone
    decoder                  FunASR PR #3705's path (its ratio is published), cold
    the rest                 upstream's path with the levers, per-layer CUDA graphs, fused
                             AdamW, log interval, the frozen encoder's outputs cached
                             (`+audiocache`: hits only where the steps repeat an utterance; its
                             losses differ from eager's by the encoder's dropout, off there)

Per arm: steady step (mean after the warm-up steps, the ranking), first step, compile seconds (the
first step's excess over a steady step), break-even steps against eager, recompiles in training
and graphs added by the validation pass, graph breaks, CUDA graph records, peak GPU memory, the
largest relative loss difference from eager (training and validation). The best arm is the
fastest steady step among compiled arms with eager's losses; x-eager is its steady step over
eager's. Each arm starts only if its own estimate fits in what is left of `--budget-s` (a cold
compile's prior or a measured one, a warm start's seconds, its steps at the steady step measured);
the JSON is rewritten complete after every arm. Targets: docs/benchmarks.md (not tests).
`--device cpu --tiny-model --backend aot_eager` runs the code path on a CPU (a smoke test, not a
measurement; the CUDA-graph arm skips).

    python benchmarks/compile_speedup.py [--steps 40] [--warmup 10] [--json out.json]

The parts import as benchmarks.matrix (arms, model, stepcount, measure, runners, table); this is
the command.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # run by its path: the benchmarks package, ftenv

from benchmarks.matrix import runners  # noqa: E402
from benchmarks.matrix.model import ENCODER, QWEN3_0_6B  # noqa: E402
from benchmarks.matrix.table import render  # noqa: E402
from ftenv import outcome, variables  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40, help="steps per arm (default 40)")
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the steady mean (default 10)")
    p.add_argument("--min-batch", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=420, help="stop starting arms after this (default 420)")
    p.add_argument("--only", type=lambda s: s.split(","), help="these arms only (eager always runs)")
    p.add_argument("--json", help="write the results here too (rewritten after every arm)")
    # The CPU, smaller stacks and other backends only check this script's code path (no measurement).
    p.add_argument("--llm-layers", type=int, default=QWEN3_0_6B["num_hidden_layers"], help=argparse.SUPPRESS)
    p.add_argument("--encoder-blocks", type=int, default=ENCODER["num_blocks"], help=argparse.SUPPRESS)
    p.add_argument("--tiny-model", action="store_true", help=argparse.SUPPRESS)
    # The offline data's utterances (building 256 takes minutes on a small CPU; the smoke test's
    # batches of 2 or 3 need few).
    p.add_argument("--train-items", type=int, default=256, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="inductor", help=argparse.SUPPRESS)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--state", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    variables.export({variables.SDPA_DEPRIORITIZED: "1"}, keep_set=True)  # before torch is imported

    import torch

    if args.child:
        runners.child(args)
        return outcome.EXIT[outcome.PASS]
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "compile_speedup: no CUDA GPU visible: this benchmark measures GPU step times; on a CPU, "
            "`--device cpu --tiny-model --backend aot_eager` checks its code path only"
        )
        return outcome.EXIT[outcome.PASS]
    out = runners.run_matrix(args)
    print(render(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return outcome.EXIT[outcome.PASS]


if __name__ == "__main__":
    sys.exit(main())
