"""`ftenv report`: the start-up report on demand, as text (stderr by default) or JSON (stdout).

The rendering is ftenv.report.render's; this module is only the command line.
"""

from __future__ import annotations

import argparse
import sys

from ftenv.attention import facts
from ftenv.report.render import assess, render_json, render_text


def run(args: argparse.Namespace) -> int:
    f = facts.collect(live=not args.no_gpu_probe)
    a = assess(f)
    out = render_json(f, a) if args.json else render_text(f, a)
    print(out, file=sys.stdout if args.json or args.stdout else sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="GPU, stack and attention-backend report (exit 0 always)")
    p.add_argument("--json", action="store_true", help="machine-readable, to stdout")
    p.add_argument("--stdout", action="store_true", help="print the text block to stdout, not stderr")
    p.add_argument("--no-gpu-probe", action="store_true", help="skip the tiny SDPA call on the GPU")
    p.set_defaults(func=run)
