"""`ftenv tinymodel`: its parser; the model is built by ftenv.selfcheck.tinymodel."""

from __future__ import annotations

import argparse
import json
import sys

from ftenv.selfcheck import tinymodel


def add_parser(sub) -> None:
    ap = sub.add_parser(
        "tinymodel",
        help="build the tiny offline Fun-ASR-Nano (random weights) and synthetic data into OUT_DIR",
    )
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, default=48)
    ap.add_argument("--n-val", type=int, default=4)
    ap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    p = tinymodel.build(args.out_dir, seed=args.seed, n_train=args.n_train, n_val=args.n_val)
    json.dump(p.to_dict(), sys.stdout, indent=2)
    print()
    return 0
