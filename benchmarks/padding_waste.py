#!/usr/bin/env python3
"""Padding waste per bucket spec: the share of padded LLM token positions and speech frames in the
compile matrix's batches (benchmarks/compile_speedup.py: the tiny offline data, 40 seeded batches
of 8 to 32 utterances), padded to their longest (FunASR's collator) or to each bucket spec.

Finer buckets waste less compute but give more shapes (more CUDA graphs, more guards); the matrix's
`+buckets` arm (no graphs) and `+buckets+graphs` arm see the two apart on a GPU, this sees the
waste on any machine.

    python benchmarks/padding_waste.py [--specs 64,32:8,12,16,24,32] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # run by its path: the benchmarks package, ftenv

from benchmarks.matrix.model import random_batches, tiny_items  # noqa: E402

#: Bucket specs measured by default: `--buckets 64`, the matrix's finer one, and two between.
SPECS = ("64", "32", "32:8,12,16,24,32", "16:8,12,16,20,24,28,32")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--specs", type=lambda s: s.split(";"), default=list(SPECS), help="`;`-separated")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--min-batch", type=int, default=8)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--json")
    args = p.parse_args(argv)
    from ftenv.selfcheck import tinymodel
    from ftenv.trainer.fastpath import buckets

    with tempfile.TemporaryDirectory(prefix="ftenv-padding-") as tmp:
        tiny = tinymodel.build(Path(tmp) / "tiny", n_train=256)
        dataset, items = tiny_items(tiny)
        batches = random_batches(dataset, items, args.steps, 0, args.min_batch, args.max_batch)
    shapes = [tuple(b["input_ids"].shape) for b in batches]
    rows = []
    for spec in [None, *args.specs]:
        parsed = buckets.parse(spec) if spec else None
        share = buckets.padding_share(batches, parsed)
        rows.append({"spec": spec or "longest", "shapes": buckets.distinct_shapes(shapes, parsed), **share})
    for r in rows:
        print(
            f"{r['spec']}: {r['shapes']} shapes; padded token positions {r['padded_token_share']:.1%}, "
            f"padded speech frames {r['padded_frame_share']:.1%}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"batches": len(batches), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
