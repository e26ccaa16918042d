"""`ftenv analyze`: its parser; the analysis is ftenv.watchdog.analyze's."""

from __future__ import annotations

from ftenv.commands.options import add_factor_option, add_time_option, count_type, from_options
from ftenv.watchdog import analyze


def add_parser(sub) -> None:
    p = sub.add_parser(
        "analyze",
        help="step-time analysis of saved FunASR training logs: slow steps, cause, verdict, fix",
        description="Prints per rank a terminal histogram of step times, the slow-step table, how slow "
        "steps line up with batch shapes new to their rank, the estimated mean step time without the "
        "slow steps, the verdict and the fix. `--json` for machines; `--plot FILE.png` draws the "
        "step-time series and the histogram with matplotlib (optional: not in the image; "
        "`pip install matplotlib`).",
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files (several ranks, rotated, .gz: fine)")
    add_factor_option(p, "the baseline")
    p.add_argument("--warmup", type=count_type, default=0, help="steps per rank to leave out (0)")
    add_time_option(p)
    p.add_argument("--top", type=count_type, default=20, help="slow steps listed (20)")
    p.add_argument("--all", action="store_true", help="list every slow step")
    p.add_argument(
        "--bins", type=int, choices=range(2, 101), default=12, metavar="N", help="histogram bins (12)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE.png", help="draw the series and histogram (needs matplotlib)")
    p.set_defaults(func=from_options(analyze.AnalyzeOptions, analyze.run))
