"""`ftenv analyze LOG [LOG...]`: the watchdog's analysis, offline, on saved FunASR logs (any ranks,
order, rotation or .gz), so that a finished or CI run gets the same verdict as a live one.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass

from ftenv import outcome, text
from ftenv.watchdog import funasr_log, not_step_time, stats
from ftenv.watchdog.detector import cause_of
from ftenv.watchdog.log_context import LogContext, closing_lines, read_context
from ftenv.watchdog.stats import Summary
from ftenv.watchdog.step import Step, mark_new_shapes, waits_text
from ftenv.watchdog.thresholds import Thresholds

BAR = 40


def histogram(values: list[float], bins: int = 12) -> list[tuple[float, float, int]]:
    """Equal-width bins from min to max: [(low, high, count)]."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi <= lo:
        return [(lo, hi, len(values))]
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(counts)]


def render_histogram(hist: list[tuple[float, float, int]]) -> list[str]:
    top = max((c for _, _, c in hist), default=0)
    lines = []
    for lo, hi, c in hist:
        bar = "#" * (math.ceil(BAR * c / top) if c else 0)
        lines.append(f"  {lo:8.3f} - {hi:8.3f} s | {bar:<{BAR}} {c}")
    return lines


def _f(x: float | None, digits: int = 3) -> str:
    return text.number(x, digits, missing="-")


def _n(x: int | None) -> str:
    return "-" if x is None else str(x)


def slow_table(s: Summary, limit: int | None) -> list[str]:
    rows = s.slow_steps if limit is None else s.slow_steps[:limit]
    head = f"  {'rank':>4} {'step':>7} {'time s':>8} {'x base':>7} {'batch':>6} {'padded':>7} {'shape':>5} "
    head += f"{'data s':>7} {'fwd s':>7} {'bwd s':>7}  cause"
    lines = [head]
    for st in rows:
        ph = dict(st.phases)
        shape = {True: "new", False: "seen", None: "-"}[st.new_shape]
        lines.append(
            f"  {st.rank:>4} {st.index:>7} {st.seconds:>8.3f} {st.seconds / s.baseline:>7.1f} "
            f"{_n(st.batch):>6} {_n(st.padded_len):>7} "
            f"{shape:>5} {_f(ph.get('data_load')):>7} {_f(ph.get('forward_time')):>7} "
            f"{_f(ph.get('backward_time')):>7}  {_cause(st, s)}"
        )
    if limit is not None and len(s.slow_steps) > limit:
        lines.append(f"  ... {len(s.slow_steps) - limit} more (--all shows every one)")
    return lines


def _cause(st: Step, s: Summary) -> str:
    waits = s.waits_of(st)
    cause = cause_of(st, s.baseline, waits)
    return f"{cause}: {waits_text(waits)}" if waits is not None else cause


def correlation(s: Summary) -> list[str]:
    slow_new = s.slow_on_new
    slow_seen = sum(1 for st in s.slow_steps if st.new_shape is False)
    fast_new = s.n_new - slow_new
    fast_seen = s.n_seen - slow_seen
    if not s.n_new and not s.n_seen:
        return ["  the log lines carry no batch shape (batch_size, batch_size_x_tokens): no shape test"]
    return [
        f"  {'':>14} {'new shape':>10} {'seen shape':>11}",
        f"  {'slow steps':>14} {slow_new:>10} {slow_seen:>11}",
        f"  {'other steps':>14} {fast_new:>10} {fast_seen:>11}",
        f"  median step time: new shapes {_f(s.new_median)} s, seen shapes {_f(s.seen_median)} s "
        f"({_f(s.new_over_seen, 1)}x)",
    ]


def render_text(
    scan: funasr_log.LogScan,
    s: Summary,
    per_rank: dict[int, Summary],
    options: AnalyzeOptions,
    ctx: LogContext,
) -> str:
    out = []
    ranks = sorted(per_rank)
    out.append(
        f"ftenv analyze: {len(scan.files)} file(s), {scan.lines} lines: {len(scan.steps)} training "
        f"steps (rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks)) or 'none'}), "
        f"{scan.val_lines} validation lines, {scan.bad_lines} step-like lines without what a step needs"
        + "".join(f", {n} `{funasr_log.MARKER_WORDS[k]}`" for k, n in scan.markers.items())
    )
    for example in scan.bad_examples:
        out.append(f"  skipped: {example}")
    out.append(ctx.report_line())
    out.extend(ctx.network.lines())
    for r in ranks:
        rs = per_rank[r]
        values = [st.seconds for st in scan.steps if st.rank == r]
        out.append("")
        out.append(
            f"rank {r}: {len(values)} steps{f' ({rs.n_apart} set apart)' if rs.n_apart else ''}, "
            f"median {_f(rs.median)} s, p95 {_f(rs.p95)} s, "
            f"max {_f(rs.max)} s, mean {_f(rs.mean)} s; step time histogram:"
        )
        out.extend(render_histogram(histogram(values, options.bins)))
    out.append("")
    out.append(
        f"slow steps (>= {s.slow_factor:g}x the baseline {_f(s.baseline)} s, the median of steps on "
        f"seen shapes): {s.n_slow} of {s.n_steps}, {stats.on_new_text(s, 'on shapes new to their rank')}"
    )
    if s.slow_steps:
        out.extend(slow_table(s, None if options.all else options.top))
    out.append("")
    out.append("new-shape correlation (a shape is new on its first (batch, padded length) in its rank):")
    out.extend(correlation(s))
    out.append("")
    out.append(
        f"mean step time {_f(s.mean)} s over {s.n_steps} steps ({s.total_seconds:.1f} s); "
        f"estimated without the slow steps: {_f(s.mean_without_slow)} s "
        f"({s.time_lost:.1f} s lost to them)"
    )
    wall = not_step_time.wall_clock_text(s.total_seconds, s.apart_steps, s.pause_seconds)
    for line in (not_step_time.apart_text(s.apart_steps), not_step_time.pause_text(s.pauses), wall):
        if line:
            out.append(line)
    out.extend(closing_lines(s, ctx, scan.steps))
    return "\n".join(out)


def to_json(
    scan: funasr_log.LogScan, s: Summary, per_rank: dict[int, Summary], bins: int, ctx: LogContext
) -> str:
    return json.dumps(
        {
            **ctx.to_dict(),
            "files": scan.files,
            "unreadable": scan.unreadable,
            "binary": scan.binary,
            "lines": scan.lines,
            "val_lines": scan.val_lines,
            "bad_lines": scan.bad_lines,
            "bad_examples": scan.bad_examples,
            "markers": scan.markers,
            "summary": s.to_dict(),
            "per_rank": {
                str(r): {
                    **{k: v for k, v in rs.to_dict().items() if k != "slow_steps"},
                    "histogram": [
                        {"low": lo, "high": hi, "count": c}
                        for lo, hi, c in histogram([st.seconds for st in scan.steps if st.rank == r], bins)
                    ],
                }
                for r, rs in per_rank.items()
            },
        },
        indent=2,
    )


def exit_code(s: Summary) -> int:
    return outcome.EXIT[s.verdict] if s.n_steps or s.n_apart else outcome.UNUSABLE


def plot(path: str, steps: list[Step], s: Summary) -> str | None:
    """Draw the series and the histogram; returns an error message or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "--plot needs matplotlib, which the image does not ship: pip install matplotlib"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in sorted({st.rank for st in steps}):
        mine = [st for st in steps if st.rank == r]
        for new, marker in ((False, "."), (True, "x"), (None, "+")):
            pts = [st for st in mine if st.new_shape is new]
            if pts:
                label = f"rank {r}, " + {False: "seen shape", True: "new shape", None: "no shape"}[new]
                ax1.plot([p.index for p in pts], [p.seconds for p in pts], marker, label=label, ms=4)
    if not math.isnan(s.baseline):
        ax1.axhline(
            s.slow_factor * s.baseline, ls="--", lw=1, color="grey", label=f"{s.slow_factor:g}x baseline"
        )
    ax1.set_xlabel("step")
    ax1.set_ylabel("step time (s)")
    ax1.set_title(f"step times: verdict {s.verdict}")
    ax1.legend(fontsize=7)
    ax2.hist([st.seconds for st in steps], bins=40)
    ax2.set_xlabel("step time (s)")
    ax2.set_ylabel("steps")
    ax2.set_title(f"{s.n_steps} steps, median {s.median:.3f} s, mean {s.mean:.3f} s")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    finally:
        plt.close(fig)
    return None


@dataclass(frozen=True)
class AnalyzeOptions:
    """What `ftenv analyze` was asked for; the defaults are its parser's (ftenv.commands.analyze)."""

    logs: tuple[str, ...]
    factor: float
    warmup: int
    time: str  # phases or total
    top: int
    all: bool
    bins: int
    json: bool
    plot: str | None


def run(options: AnalyzeOptions) -> int:
    try:
        return _run(options)
    except BrokenPipeError:  # `ftenv analyze LOG | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(options: AnalyzeOptions) -> int:
    scan, ctx = read_context(options.logs, options.time)
    unusable = False
    for problem in scan.unreadable:
        print(f"ftenv analyze: cannot read {problem}", file=sys.stderr)
        unusable = True
    thresholds = Thresholds(warmup=options.warmup)
    steps = mark_new_shapes(scan.steps)
    summary = stats.summarize(steps, thresholds, options.factor, **ctx.fix_facts())
    per_rank = {
        r: stats.summarize([st for st in steps if st.rank == r], thresholds, options.factor)
        for r in sorted({st.rank for st in steps})
    }
    status = outcome.UNUSABLE if unusable or not steps else exit_code(summary)
    if not scan.files:
        return outcome.UNUSABLE
    if options.json:
        print(to_json(scan, summary, per_rank, options.bins, ctx))
    elif not steps:
        for name in scan.files:
            why = " (it looks like a binary file, not a log)" if name in scan.binary else ""
            print(f"ftenv analyze: {name}: no FunASR training step lines{why}", file=sys.stderr)
        print(
            f"ftenv analyze: no training steps found in {scan.lines} lines "
            f"({scan.val_lines} validation lines, {scan.bad_lines} step-like lines without a rank or "
            "a usable time); expected lines like `... - train, rank: 0, epoch: ..., total step: N, ..., "
            "{'data_load': ..., 'total_time': ...}`",
            file=sys.stderr,
        )
    else:
        print(render_text(scan, summary, per_rank, options, ctx))
    if options.plot:
        problem = plot(options.plot, steps, summary) if steps else "no training steps to plot"
        if problem:
            print(f"ftenv analyze: {problem}", file=sys.stderr)
            status = outcome.UNUSABLE
        else:
            print(f"ftenv analyze: plot written to {options.plot}", file=sys.stderr)
    return status
