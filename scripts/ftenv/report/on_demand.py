"""`ftenv report`: the start-up report on demand, as text (stderr by default) or JSON (stdout)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ftenv.attention import facts
from ftenv.report import network
from ftenv.report.render import assess, render_json, render_text


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
    f = facts.collect(live=options.sdpa_call)
    a = assess(f)
    net = network.collect(nodes, launcher)
    if options.json:
        out = render_json(f, a, network.as_dict(net))
    else:
        out = render_text(f, a, compile_line, network.render_lines(net))
    print(out, file=sys.stdout if options.json or options.stdout else sys.stderr)
    return 0
