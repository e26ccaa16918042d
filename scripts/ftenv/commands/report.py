"""`ftenv report`: its parser; the report is ftenv.report's, its compile line ftenv.trainer's."""

from __future__ import annotations

import argparse

from ftenv import variables
from ftenv.launch import node_count
from ftenv.report import on_demand
from ftenv.trainer import compile_setting


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="GPU, stack and attention-backend report (exit 0 always)")
    p.add_argument("--json", action="store_true", help="machine-readable, to stdout")
    p.add_argument("--stdout", action="store_true", help="print the text block to stdout, not stderr")
    p.add_argument("--no-gpu-probe", action="store_true", help="skip the tiny SDPA call on the GPU")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = on_demand.ReportOptions(json=args.json, stdout=args.stdout, sdpa_call=not args.no_gpu_probe)
    return on_demand.run(
        options, compile_setting.report_line(), *node_count.node_count(variables.environment())
    )
