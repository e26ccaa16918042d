#!/usr/bin/env python3
"""GPU benchmark matrix: Fun-ASR-Nano fine-tune steps, eager against each lever of the fast path.

The tiny self-check model is far too small to show a launch-bound step, so this builds, offline and
with random weights, a model of Fun-ASR-Nano's dimensions (benchmarks.matrix.model) and trains the
same seeded, shape-varying batches from the same weights in every arm (benchmarks.matrix.arms, in
the order they run), under TORCH_CUDNN_SDPA_DEPRIORITIZED=1 ("eager + the variable" in FunASR issue
#3704). What each arm and column measures, the gate, the ranking and the targets (not tests):
docs/benchmarks.md. `--device cpu --tiny-model --backend aot_eager` runs the code path on a CPU (a
smoke test, not a measurement; the CUDA-graph arms skip).

    python benchmarks/compile_speedup.py [--steps 40] [--warmup 10] [--json out.json]
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
