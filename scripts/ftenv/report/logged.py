"""The start-up report read back from a saved log, so that `ftenv analyze` knows the run's variable
value, compile, GPU and stack. Tests render a report and read it back, so the two cannot drift
apart.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ftenv import text, variables
from ftenv.attention import process_settings, sdpa
from ftenv.stack import versions

HEADER = "== ftenv report: "
_HEADER_BYTES = HEADER.encode()
_STACK = re.compile(r"^stack   torch (\S+) \(CUDA [^)]*\), cuDNN (\S+), ")
_GPU = re.compile(r"^GPU (\d+)\s+(.+), sm_(\d+)(\d), [\d.]+ GiB$")
_SDPA = re.compile(rf"^SDPA    {variables.SDPA_DEPRIORITIZED}(=| unset)")
_COMPILE = re.compile(r"^compile (on: ([^()]+?) \(|off)")


@dataclass
class LoggedReport:
    """What a start-up report in a log says (None: the line was absent or unreadable)."""

    image: str
    torch_version: str | None = None
    cudnn_version: int | None = None
    #: (name, (major, minor)) per GPU line.
    gpus: list[tuple[str, tuple[int, int]]] = field(default_factory=list)
    deprioritized: sdpa.DeprioritizedSetting | None = None
    #: The compiled parts ("decoder", ...); () when off; None when the line is absent.
    compiled: tuple[str, ...] | None = None

    def cudnn_first(self) -> bool | None:
        """Whether torch's rule puts cuDNN attention first on the report's GPUs with its stack and
        the variable's value; None when a fact is missing."""
        if self.deprioritized is None:
            return None
        arches = [sm for _, sm in self.gpus]
        return process_settings.cudnn_first_on(
            arches, self.torch_version, self.cudnn_version, self.deprioritized
        )

    def line(self) -> str:
        """One line for `ftenv analyze`: the GPU, the stack, the variable, compile."""
        gpus = (
            ", ".join(dict.fromkeys(f"{name} ({sdpa.sm_name(sm)})" for name, sm in self.gpus)) or "GPU none"
        )
        env = (
            f"{variables.SDPA_DEPRIORITIZED} unknown"
            if self.deprioritized is None
            else text.assignment(variables.SDPA_DEPRIORITIZED, self.deprioritized.raw)
        )
        compiled = {None: "compile unknown", (): "compile off"}.get(
            self.compiled, f"compile on: {', '.join(self.compiled or ())}"
        )
        return (
            f"{gpus}; torch {self.torch_version or 'unknown'}, cuDNN {sdpa.cudnn_name(self.cudnn_version)}; "
            f"{env}; {compiled}"
        )


class ReportReader:
    """Fed a log's lines in order; `latest` is the last complete report seen (a log may hold
    several: one per node, or per restart). Lines are str, without newline."""

    def __init__(self) -> None:
        self.latest: LoggedReport | None = None
        self._current: LoggedReport | None = None

    def wants(self, line: bytes) -> bool:
        """Cheap test before feed(): inside a report block, or its first line."""
        return self._current is not None or line.startswith(_HEADER_BYTES)

    def feed(self, line: str) -> None:
        if line.startswith(HEADER):
            self._current = LoggedReport(image=line[len(HEADER) :].rstrip(" =\r"))
            self.latest = self._current
            return
        r = self._current
        if r is None:
            return
        line = line.rstrip("\r")
        if m := _STACK.match(line):
            r.torch_version, r.cudnn_version = m[1], versions.cudnn_int_or_none(m[2])
        elif m := _GPU.match(line):
            r.gpus.append((m[2], (int(m[3]), int(m[4]))))
        elif m := _SDPA.match(line):
            r.deprioritized = sdpa.interpret_deprioritized(_raw_value(line) if m[1] == "=" else None)
        elif m := _COMPILE.match(line):
            r.compiled = tuple(p.strip() for p in m[2].split(",")) if m[2] else ()
        elif line.startswith("verdict "):
            self._current = None  # the block's last fixed line


def _raw_value(line: str) -> str | None:
    """The variable's value as text.assignment wrote it (shell-quoted where needed), up to the
    `:` that ends it."""
    rest = line.split(f"{variables.SDPA_DEPRIORITIZED}=", 1)[1]
    try:
        lexer = shlex.shlex(rest, posix=True)
        lexer.whitespace_split, lexer.whitespace = True, ":"
        return next(iter(lexer), "")
    except ValueError:
        return rest.split(":", 1)[0]
