"""What a saved log says besides its steps (the start-up report, a final traceback), so that `ftenv
analyze` never names a fix already in place nor gives a bare PASS under a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ftenv.report.logged import LoggedReport, ReportReader
from ftenv.watchdog import crash, funasr_log
from ftenv.watchdog.nccl_net import NcclNetwork
from ftenv.watchdog.stats import Summary, fix_lines
from ftenv.watchdog.step import Step


@dataclass
class LogContext:
    """What the log says besides the steps: its start-up report, the exception it ends with, and
    the network NCCL chose (ftenv.watchdog.nccl_net)."""

    report: LoggedReport | None = None
    error: str | None = None  # the exception line of a traceback after the last step
    network: NcclNetwork = field(default_factory=NcclNetwork)
    stop: dict | None = None  # a stop line after the last step (crash.read_stop): stopped and saved

    def fix_facts(self) -> dict:
        """stats.summarize's keywords for the fix: what the report shows is in place."""
        r = self.report
        if r is None:
            return {}
        return {"deprioritized": r.deprioritized, "compiled": r.compiled, "cudnn_first": r.cudnn_first()}

    def to_dict(self) -> dict:
        """For `ftenv analyze --json`: the report's facts (None without one) and the crash."""
        r = self.report
        report = None
        if r is not None:
            report = {
                "image": r.image,
                "torch": r.torch_version,
                "cudnn": r.cudnn_version,
                "gpus": [{"name": name, "sm": f"sm_{sm[0]}{sm[1]}"} for name, sm in r.gpus],
                "env": None
                if r.deprioritized is None
                else {"raw": r.deprioritized.raw, "state": r.deprioritized.state},
                "compiled": None if r.compiled is None else list(r.compiled),
                "cudnn_first": r.cudnn_first(),
            }
        return {
            "report": report,
            "crash": None if self.stop else self.error,
            "stop": self.stop,
            "nccl_network": self.network.to_dict(),
        }

    def report_line(self) -> str:
        if self.report is None:
            return (
                "start-up report: none in the log (the variable's value, compile, GPU and stack unknown: "
                "the fix cannot take them into account)"
            )
        return f"start-up report in the log: {self.report.line()}"


def read_context(paths: list[str], time: str) -> tuple[funasr_log.LogScan, LogContext]:
    """Scan the logs for steps, the start-up report (ftenv.report.logged) and tracebacks
    (ftenv.watchdog.crash)."""
    reader, tracebacks, seen, network = ReportReader(), crash.Tracebacks(), [0], NcclNetwork()
    stops: list[tuple[int, dict]] = []  # (steps before it, the stop line's fields)

    def on_line(line: bytes, steps: int) -> None:
        seen[0] = steps
        network.observe(line)  # its own cheap test (nccl_net.MARK)
        if (stop := crash.read_stop(line)) is not None:
            stops.append((steps, stop))
        if reader.wants(line):
            reader.feed(line.decode("utf-8", "replace"))
        if tracebacks.wants(line):
            tracebacks.feed(line, steps)

    scan = funasr_log.scan_files(paths, time=time, on_line=on_line)
    # A stop followed by steps was resumed (a requeued job appends to the same log): not the end.
    stop = stops[-1][1] if stops and stops[-1][0] == seen[0] else None
    context = LogContext(reader.latest, tracebacks.crash(seen[0]), network=network, stop=stop)
    return scan, context


def closing_lines(s: Summary, ctx: LogContext, steps: list[Step]) -> list[str]:
    """The verdict and the fix; after a crash, the failure first and the verdict labelled as what
    it is (never a bare `verdict: PASS` under a traceback); after a saved stop, the stop first
    (never a failure)."""
    out = []
    last = max((st.index for st in steps), default=None)
    if ctx.stop is not None:  # a saved stop, even if a launcher printed a traceback on the signal
        out.append(crash.stopped_line(ctx.stop, last))
    elif ctx.error is not None:
        out.append(crash.failure_line(None, ctx.error, last))
    label = crash.verdict_label(stopped=ctx.stop is not None, failed=ctx.error is not None)
    out.append(f"{label}: {s.verdict}")
    out.extend(f"  - {r}" for r in s.reasons)
    return out + fix_lines(s, "", "  ")
