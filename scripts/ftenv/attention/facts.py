"""Collect what the report needs from the running process, each fact guarded on its own.

A fact that cannot be read is None ("unknown" in the report) with the reason kept in `problems`:
private torch APIs can vanish between releases, a driver can be missing or too old, and none of
that may crash the entrypoint. Stack is the one record of the stack that every reader fills.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from ftenv import variables

#: Fun-ASR-Nano's LLM (Qwen3-0.6B): 16 query heads of 128; the probe uses its head size.
LLM_HEADS, LLM_HEAD_DIM = 16, 128
_NVIDIA_PROC = Path("/proc/driver/nvidia/version")


@dataclass
class Stack:
    """Which torch, which cuDNN, which GPU arch(es), which value of the SDPA variable: one record
    for the report, the watchdog, the probe and the self-check; None (no arches) is unknown."""

    torch_version: str | None = None
    cudnn_version: int | None = None  # torch.backends.cudnn.version()'s form, e.g. 91002
    arches: tuple[tuple[int, int], ...] = ()  # distinct compute capabilities, sorted
    deprioritized_raw: str | None = None  # the variable's value, as set
    device: str | None = None  # the device a measurement ran on ("cuda", "cpu")
    cpu_threads: int | None = None
    gpu: str | None = None  # the name of the measured GPU

    def as_dict(self) -> dict:
        """The form `ftenv probe` and `ftenv selfcheck` write (its keys are what `--json` users read)."""
        out = {
            "device": self.device,
            "torch": self.torch_version,
            "cudnn": self.cudnn_version,
            variables.SDPA_DEPRIORITIZED: self.deprioritized_raw,
            "cpu_threads": self.cpu_threads,
        }
        if self.gpu is not None:
            sm = f"sm_{self.arches[0][0]}{self.arches[0][1]}" if self.arches else None
            out["gpu"], out["sm"] = self.gpu, sm
        return out


@dataclass
class Gpu:
    index: int
    name: str
    sm: tuple[int, int]
    memory_bytes: int


def distinct_arches(gpus: list[Gpu]) -> tuple[tuple[int, int], ...]:
    return tuple(sorted({g.sm for g in gpus}))


@dataclass
class Facts:
    image: str | None = None
    variant: str | None = None
    min_driver: str | None = None
    stack: Stack = field(default_factory=Stack)
    torch_cuda: str | None = None  # the CUDA torch was built for, "12.6"
    transformers_version: str | None = None
    funasr_version: str | None = None
    libcuda_found: bool = False
    driver_version: str | None = None  # "580.126.20"
    driver_cuda: int | None = None  # cuDriverGetVersion(), e.g. 12060
    gpus: list[Gpu] = field(default_factory=list)
    live_order: list[int] | None = None
    padded_choice: int | None = None
    shm_bytes: int | None = None
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.gpus and not self.stack.arches:
            self.stack.arches = distinct_arches(self.gpus)

    def to_dict(self) -> dict:
        """`ftenv report --json`'s "facts": flat, with the keys and order it had before Stack."""
        d = asdict(self)
        stack = self.stack
        d.update(
            torch_version=stack.torch_version,
            cudnn_version=stack.cudnn_version,
            env_raw=stack.deprioritized_raw,
        )
        return {k: d[k] for k in _JSON_KEYS}


_JSON_KEYS = (
    "image",
    "variant",
    "min_driver",
    "torch_version",
    "torch_cuda",
    "cudnn_version",
    "transformers_version",
    "funasr_version",
    "libcuda_found",
    "driver_version",
    "driver_cuda",
    "gpus",
    "env_raw",
    "live_order",
    "padded_choice",
    "shm_bytes",
    "problems",
)


def read_stack(device: str) -> Stack:
    """This process's stack on `device` ("cuda" or "cpu"); torch is imported here."""
    import torch

    stack = Stack(
        torch.__version__,
        deprioritized_raw=variables.read(variables.SDPA_DEPRIORITIZED),
        device=device,
        cpu_threads=torch.get_num_threads(),
    )
    with contextlib.suppress(Exception):
        stack.cudnn_version = torch.backends.cudnn.version()
    if device == "cuda":
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        stack.gpu, stack.arches = p.name, ((p.major, p.minor),)
    return stack


def package_version(*names: str) -> str | None:
    """The installed version of the first of these distributions that is installed."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _driver(facts: Facts) -> None:
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return
    facts.libcuda_found = True
    version = ctypes.c_int()
    if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
        facts.driver_cuda = version.value
    with contextlib.suppress(OSError):
        match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", _NVIDIA_PROC.read_text())
        facts.driver_version = match.group(1) if match else None


def _gpus(facts: Facts, torch) -> None:
    try:
        if not torch.cuda.is_available():
            return
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            facts.gpus.append(Gpu(i, p.name, (p.major, p.minor), p.total_memory))
        facts.stack.arches = distinct_arches(facts.gpus)
    except Exception as exc:  # a broken driver raises many kinds of errors
        facts.problems.append(f"CUDA: {exc}")


def _sdpa(facts: Facts, torch) -> None:
    try:
        q = torch.randn(1, LLM_HEADS, 32, LLM_HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        # The order is stored lazily, at the first SDPA call: make one before reading it.
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
        torch.cuda.synchronize()
    except Exception as exc:
        facts.problems.append(f"SDPA call: {exc}")
        return
    try:
        facts.live_order = [int(b) for b in torch._C._get_sdp_priority_order()]
    except Exception as exc:
        facts.problems.append(f"torch._C._get_sdp_priority_order: {exc}")
    try:
        # A right-padded batch as transformers passes it: boolean mask (B, 1, Q, K).
        mask = torch.ones(1, 1, 32, 32, device="cuda", dtype=torch.bool)
        mask[..., 24:] = False
        facts.padded_choice = int(torch._fused_sdp_choice(q, q, q, attn_mask=mask))
    except Exception as exc:
        facts.problems.append(f"torch._fused_sdp_choice: {exc}")


def collect(live: bool = True) -> Facts:
    """Read everything; live=False lists the GPUs but skips the SDPA call on them (no kernel runs)."""
    facts = Facts(
        image=variables.read(variables.IMAGE),
        variant=variables.read(variables.VARIANT),
        min_driver=variables.read(variables.MIN_DRIVER),
        stack=Stack(deprioritized_raw=variables.read(variables.SDPA_DEPRIORITIZED)),
        transformers_version=package_version("transformers"),
        funasr_version=package_version("funasr"),
    )
    with contextlib.suppress(OSError):
        shm = os.statvfs("/dev/shm")
        facts.shm_bytes = shm.f_blocks * shm.f_frsize
    _driver(facts)
    try:
        import torch
    except Exception as exc:
        facts.problems.append(f"import torch: {exc}")
        return facts
    facts.stack.torch_version = torch.__version__
    facts.torch_cuda = torch.version.cuda
    try:  # loads libcudnn; works without a GPU, returns None on CPU-only builds
        facts.stack.cudnn_version = torch.backends.cudnn.version()
    except Exception as exc:
        facts.problems.append(f"cuDNN: {exc}")
    _gpus(facts, torch)
    if live and facts.gpus:
        _sdpa(facts, torch)
    return facts
