"""`ftenv report`: the start-up report on demand, as text (stderr by default) or JSON (stdout)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ftenv.attention import facts
from ftenv.report import network
from ftenv.report.render import assess, render_json, report_text


@dataclass(frozen=True)
class ReportOptions:
    """What `ftenv report` was asked for."""

    json: bool = False
    stdout: bool = False  # the text block to stdout, not stderr
    sdpa_call: bool = True  # the tiny SDPA call on the GPU (--no-gpu-probe: False)


def run(
    options: ReportOptions, compile_line: str, nodes: int | None = None, launcher: str | None = None
) -> int:
    """Print the report; `compile_line` is the faster-training line (ftenv.trainer.compile_setting),
    `nodes` and `launcher` where the job runs (ftenv.launch.cluster_env; None: unknown)."""
    if options.json:
        f = facts.collect(live=options.sdpa_call)
        out = render_json(f, assess(f), network.as_dict(network.collect(nodes, launcher)))
    else:
        out = report_text(compile_line, nodes, launcher, live=options.sdpa_call)
    print(out, file=sys.stdout if options.json or options.stdout else sys.stderr)
    return 0
