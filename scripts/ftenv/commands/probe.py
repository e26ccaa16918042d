"""`ftenv probe`: its parser; the measurement is ftenv.attention.probe's."""

from __future__ import annotations

import argparse

from ftenv.attention import probe


def add_parser(sub) -> None:
    p = sub.add_parser(
        "probe",
        help="time the per-new-shape cost of padded bf16 attention (current settings vs cuDNN first)",
        description="`ftenv probe`: what one new attention shape costs, measured, under the current "
        "settings and with cuDNN attention forced first.",
    )
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return probe.run(probe.ProbeOptions(device=args.device, json=args.json))
