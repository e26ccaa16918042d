"""The lines our tools print, rendered by their own code from injected facts (the start-up report's
verdicts, the watchdog's slow-step lines and summary), and a doc's quotes of them checked against
those renderings: a quoted line that the code no longer prints misleads whoever searches the log
for it."""

from __future__ import annotations

import re

from ftenv.attention import sdpa
from ftenv.attention.facts import Facts, Gpu, Stack
from ftenv.report import render
from ftenv.stack import versions
from ftenv.trainer import compile_setting
from ftenv.watchdog import slow_step_lines
from ftenv.watchdog import step as step_types
from support import ROOT

#: The torch the images pin, as the rule reads it (the guide's sample lines are for this stack).
TORCH = versions.load(ROOT / "versions.toml").default.torch


def quoted_lines(text: str) -> list[str]:
    """The lines of the guide's fenced blocks that reproduce our tools' output."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    return [
        ln.strip()
        for b in blocks
        for ln in b.splitlines()
        if ln.strip().startswith(("verdict ", "[ftenv-watch]"))
    ]


def report_text(sm: tuple[int, int] | None, raw: str | None, order, choice) -> list[str]:
    """The start-up report's lines, rendered by the code from injected facts."""
    gpus = [Gpu(0, "GPU0", sm, 141 * 2**30)] if sm else []
    f = Facts(stack=Stack(TORCH, 91900, deprioritized_raw=raw), gpus=gpus)
    f.live_order, f.padded_choice = order, choice
    return render.render_text(f, render.assess(f), compile_setting.report_line()).splitlines()


def template(quoted: str) -> re.Pattern:
    """A quoted line with placeholders (R, N, T, M, B, L numbers, Kx a ratio, A, C, F and ... any
    text) as a regex."""
    pattern = re.sub(r"\\\.\\\.\\\.|\b[ACF]\b", ".*", re.escape(quoted))
    pattern = re.sub(r"\bKx\b", r"[0-9.]+x", pattern)
    return re.compile(re.sub(r"\b[RNTMBL]\b", r"[0-9.]+", pattern))


def numbers_blanked(line: str) -> str:
    """A line with its numbers blanked: a quoted run and a rendered one then compare."""
    return re.sub(r"\d+(?:\.\d+)?", "#", line)


def watchdog_lines() -> tuple[list[str], list[str]]:
    """What the watchdog prints for a steady run on four repeating shapes, then one slow new shape."""
    w = slow_step_lines.SlowStepLines()
    for i in range(22):
        assert w.observe(step_types.Step(i, 0.080 + 0.001 * (i % 5), 2, 100 + 20 * (i % 4), 0)) == []
    w.val_lines = 3
    summary = w.summary_lines()
    phases = (("data_load", 0.011), ("forward_time", 0.44), ("backward_time", 0.53), ("optim_time", 0.019))
    return summary, w.observe(step_types.Step(22, 1.0, 2, 333, 0, phases=phases))


def unquoted_lines(text: str) -> list[str]:
    """The guide's quoted report and watchdog lines that the code does not print."""
    ok = report_text((9, 0), "1", [1, 2, 0, 3, 4], 2)
    exposed = report_text((10, 0), None, None, sdpa.CUDNN)
    no_gpu = report_text(None, None, None, None)
    summary, slow = watchdog_lines()
    wrong = []
    for line in quoted_lines(text):
        if line.startswith("verdict "):
            good = line in ok
        elif line.startswith(("[ftenv-watch] SLOW STEP", "[ftenv-watch]   ")):
            # the short line, then (the first time) the indented explanation: each quoted line
            # is one of them, placeholders filled
            good = any(template(line).fullmatch(printed) for printed in slow)
        else:
            good = numbers_blanked(line) in map(numbers_blanked, summary)
        if not good:
            wrong.append(line)
    flat = " ".join(text.split())
    exposed_line = next(ln for ln in exposed if ln.startswith("verdict "))
    for fix in re.findall(r"\(`(Fix: [^`]+)`\)", flat):
        if not (exposed_line.startswith("verdict EXPOSED: ") and exposed_line.endswith(fix)):
            wrong.append(fix)
    for mention in re.findall(r"`(verdict [A-Z ]+)`", flat):
        if not any(ln.startswith(mention.rstrip(" .")) for ln in ok + exposed + no_gpu):
            wrong.append(mention)
    return wrong
