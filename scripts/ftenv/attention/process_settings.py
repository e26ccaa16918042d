"""The attention settings that apply to a running training process, read from outside it.

The watchdog is the training process's parent: it must not initialise CUDA (a CUDA context would
hold GPU memory for the whole run) and must not import torch. So:
- GPU architecture: NVML through ctypes (libnvidia-ml.so.1, which needs no CUDA context), else
  `nvidia-smi --query-gpu=compute_cap`; unknown when neither works.
- TORCH_CUDNN_SDPA_DEPRIORITIZED: from the environment of the training process itself
  (/proc/PID/environ of the watched command and its descendants, so that a script that exports it
  is seen), else from this process's environment.
- torch: importlib.metadata (no import). cuDNN: the image's CUDNN_VERSION variable, else the
  version of the installed cuDNN wheel, by the package names versions.toml lists.
Then the rule in ftenv.attention.sdpa decides whether cuDNN goes first. Anything unreadable is "unknown";
nothing here raises.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ftenv import text, variables
from ftenv.attention import sdpa
from ftenv.attention.facts import Stack, package_version
from ftenv.stack import versions

#: The cuDNN version the base image declares (its ENV): read when torch cannot say.
CUDNN_VERSION = "CUDNN_VERSION"


@dataclass(frozen=True)
class AttentionSettings:
    #: What could be read without torch: torch and cuDNN by package metadata, the visible GPUs'
    #: arches, the variable's value in the training process; None (no arches) is unknown.
    stack: Stack
    arch_source: str  # "nvml", "nvidia-smi", or why unknown
    variable_source: str  # "training process", "training process (values differ: ...)", "environment"
    #: cuDNN first on the (first) GPU by torch's rule; None when a needed fact is unknown.
    cudnn_first: bool | None

    @property
    def deprioritized(self) -> sdpa.DeprioritizedSetting:
        return sdpa.interpret_deprioritized(self.stack.deprioritized_raw)

    @property
    def arch_text(self) -> str:
        arches = self.stack.arches
        return "/".join(sdpa.sm_name(a) for a in arches) if arches else "GPU arch unknown"

    @property
    def deprioritized_text(self) -> str:
        return text.assignment(variables.SDPA_DEPRIORITIZED, self.stack.deprioritized_raw)

    @property
    def first_text(self) -> str:
        return {True: "yes", False: "no", None: "unknown"}[self.cudnn_first]

    def line(self) -> str:
        s = self.stack
        return (
            f"{self.arch_text}, {self.deprioritized_text}, cuDNN attention first: {self.first_text} "
            f"(torch {s.torch_version or 'unknown'}, cuDNN {sdpa.cudnn_name(s.cudnn_version)})"
        )

    def why_not_first(self) -> str:
        """Plain words for cudnn_first == False (the rule's own, from sdpa)."""
        s = self.stack
        return sdpa.reason_not_first(s.torch_version, s.cudnn_version, s.arches, self.deprioritized)

    def unknown_facts(self) -> list[str]:
        missing = []
        if not self.stack.arches:
            missing.append("GPU arch")
        if self.stack.torch_version is None:
            missing.append("torch version")
        if self.stack.cudnn_version is None:
            missing.append("cuDNN version")
        return missing


def _nvml_arches() -> tuple[tuple[int, int], ...] | None:
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    try:
        if nvml.nvmlInit_v2() != 0:
            return None
        try:
            count = ctypes.c_uint()
            if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return None
            arches = set()
            for i in range(count.value):
                handle = ctypes.c_void_p()
                major, minor = ctypes.c_int(), ctypes.c_int()
                if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                    continue
                if nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor)):
                    continue
                arches.add((major.value, minor.value))
            return tuple(sorted(arches)) or None
        finally:
            nvml.nvmlShutdown()
    except (AttributeError, OSError):
        return None


def _smi_arches() -> tuple[tuple[int, int], ...] | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    arches = set()
    for line in out.splitlines():
        m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", line)
        if m:
            arches.add((int(m.group(1)), int(m.group(2))))
    return tuple(sorted(arches)) or None


def gpu_arches() -> tuple[tuple[tuple[int, int], ...], str]:
    arches = _nvml_arches()
    if arches:
        return arches, "nvml"
    arches = _smi_arches()
    if arches:
        return arches, "nvidia-smi"
    return (), "no NVML or nvidia-smi answer"


def cudnn_packages() -> tuple[str, ...]:
    """The cuDNN wheels of every variant in versions.toml (nvidia-cudnn-cu13, ...); none when the
    file cannot be read, and the cuDNN version is then unknown rather than guessed."""
    try:
        variants = versions.load().variants.values()
    except (SystemExit, OSError, KeyError, TypeError, ValueError):
        return ()
    return tuple(dict.fromkeys(v.cudnn_package for v in variants))


def proc_environ(pid: int) -> dict[str, str] | None:
    """Process pid's environment as it started (/proc/PID/environ), or None when it cannot be read:
    what the training process was given, whatever the shell that started it holds now."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def process_tree(root: int) -> list[int]:
    """root and its descendants, breadth first (Linux /proc; [root] elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    except OSError:
        return [root]
    for pid in entries:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    order, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        order.append(pid)
        queue.extend(sorted(children.get(pid, [])))
    return order


def process_env(root: int | None, names: tuple[str, ...]) -> tuple[dict[str, str | None], str]:
    """The values of `names` in the training process: the deepest process of root's tree whose
    environment can be read (the trainer, or a worker of it). Falls back to os.environ."""
    if root is not None:
        envs = [e for e in (proc_environ(p) for p in process_tree(root)) if e is not None]
        if envs:
            deepest = envs[-1]
            values = {n: deepest.get(n) for n in names}
            differing = sorted({str(e.get(names[0])) for e in envs})
            source = "training process"
            if len(differing) > 1:
                source += f" (values differ along the process tree: {', '.join(differing)})"
            return values, source
    return {n: os.environ.get(n) for n in names}, "environment"


def cudnn_first_on(
    arches: tuple[tuple[int, int], ...] | list[tuple[int, int]],
    torch_version: str | None,
    cudnn_version: int | None,
    setting: sdpa.DeprioritizedSetting,
) -> bool | None:
    """The rule (sdpa.cudnn_first_by_rule) over every GPU of a run seen from outside, a process here
    or a logged report (ftenv.report.logged): first on one is enough; None when it is first on none
    and unknown on one, or when there is no GPU to judge."""
    firsts = {sdpa.cudnn_first_by_rule(torch_version, cudnn_version, sm, setting) for sm in arches}
    if True in firsts:
        return True
    return None if None in firsts or not firsts else False


def read_process_settings(pid: int | None = None) -> AttentionSettings:
    """Read the settings once (cheap: no CUDA, no torch import). pid: the watched command."""
    try:
        arches, arch_source = gpu_arches()
    except Exception as exc:  # never let the read take the watchdog down
        arches, arch_source = (), f"read failed: {exc}"
    names = (variables.SDPA_DEPRIORITIZED, CUDNN_VERSION)
    try:
        values, variable_source = process_env(pid, names)
    except Exception:  # a /proc that fails mid-walk: this process's environment, as without a pid
        values, variable_source = process_env(None, names)
    raw = variables.given(variables.SDPA_DEPRIORITIZED, values)
    deprioritized = sdpa.interpret_deprioritized(raw)
    torch_version = package_version("torch")
    cudnn = versions.cudnn_int_or_none(values.get(CUDNN_VERSION) or os.environ.get(CUDNN_VERSION))
    if cudnn is None:
        cudnn = versions.cudnn_int_or_none(package_version(*cudnn_packages()))
    if arches:
        first = cudnn_first_on(arches, torch_version, cudnn, deprioritized)
    else:  # the variable alone can already say no
        first = False if deprioritized.deprioritizes else None
    stack = Stack(torch_version, cudnn, arches, raw)
    return AttentionSettings(stack, arch_source, variable_source, first)
