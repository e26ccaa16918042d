"""How torch picks the scaled-dot-product-attention backend, and whether a run is exposed.

Pure logic, no torch import: the facts (versions, GPU arch, the variable, the live order) come in
as arguments so that every case can be tested without a GPU. The rule is the one read from
PyTorch's sdp_utils.cpp (see docs/cudnn-sdpa-guide.md): in torch >= 2.10, cuDNN moves to the front of the
order when the runtime cuDNN is newer than 9.15.0, the device is sm_90, sm_100 or sm_103, and
TORCH_CUDNN_SDPA_DEPRIORITIZED is not exactly "1".
"""

from __future__ import annotations

from dataclasses import dataclass

from ftenv.build import versions

ENV_VAR = "TORCH_CUDNN_SDPA_DEPRIORITIZED"
FIX = f"{ENV_VAR}=1"
#: torch's SDPBackend codes, as torch._C._get_sdp_priority_order() and _fused_sdp_choice return them.
BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}
CUDNN = 3
#: Compute capabilities on which torch 2.10/2.11 prefers cuDNN attention.
PREFERRING_SM = frozenset({(9, 0), (10, 0), (10, 3)})
#: torch.backends.cudnn.version() must be above this (9.15.0) for the preference to apply.
CUDNN_PREFERRED_ABOVE = 91500
#: The first torch release that reads ENV_VAR and prefers cuDNN.
FIRST_PREFERRING_TORCH = (2, 10)


def sm_name(sm: tuple[int, int]) -> str:
    return f"sm_{sm[0]}{sm[1]}"


def backend_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    return BACKENDS.get(code, f"backend {code}")


def cudnn_name(version: int | None) -> str:
    """91900 -> '9.19.0'."""
    if version is None:
        return "unknown"
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}"


def torch_release(version: str | None) -> tuple[int, int] | None:
    """'2.11.0+cu130' -> (2, 11); None when it cannot be read."""
    return versions.release(version, 2)


@dataclass(frozen=True)
class EnvSetting:
    """What torch makes of the variable's raw value."""

    raw: str | None
    state: str  # "unset", "deprioritized", "prefer-cudnn", "ignored"
    meaning: str

    @property
    def deprioritizes(self) -> bool:
        return self.state == "deprioritized"


def interpret_env(raw: str | None) -> EnvSetting:
    """torch reads the variable with c10::utils::check_env: only "1" and "0" mean anything."""
    if raw is None:
        return EnvSetting(raw, "unset", "unset: torch's default order applies")
    if raw == "1":
        return EnvSetting(raw, "deprioritized", "cuDNN attention is not moved to the front")
    if raw == "0":
        return EnvSetting(raw, "prefer-cudnn", "explicitly asks torch to prefer cuDNN attention")
    return EnvSetting(
        raw,
        "ignored",
        f"torch ignores {raw!r} (only 1 or 0 are read; it prints 'Ignoring invalid value for "
        f"boolean flag') and behaves as if unset. Fix: set {FIX} exactly",
    )


def cudnn_first_by_rule(
    torch_version: str | None, cudnn_version: int | None, sm: tuple[int, int], env: EnvSetting
) -> bool | None:
    """Whether torch puts cuDNN first on this GPU; None when a needed fact is unknown."""
    release = torch_release(torch_version)
    if release is None:
        return None
    if release < FIRST_PREFERRING_TORCH or sm not in PREFERRING_SM or env.deprioritizes:
        return False
    if cudnn_version is None:
        return None
    return cudnn_version > CUDNN_PREFERRED_ABOVE


@dataclass(frozen=True)
class Verdict:
    """One line for the report: exposed to per-shape cuDNN plan builds, or not, and why."""

    level: str  # "ok", "exposed", "unknown", "no-gpu"
    reason: str
    fix: str | None = None

    @property
    def line(self) -> str:
        head = {
            "ok": "OK",
            "exposed": "EXPOSED",
            "unknown": "UNKNOWN",
            "no-gpu": "NO GPU",
        }[self.level]
        text = f"{head}: {self.reason}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


EXPOSED_SYMPTOM = (
    "padded batches go to cuDNN attention, which builds a new plan for every (batch, padded "
    "length) it has not seen: expect training steps on new batch shapes to take several times "
    "longer (about 1 s against 0.1 s in the field report)"
)


def verdict(
    *,
    gpus: list[tuple[int, int]],
    torch_version: str | None,
    cudnn_version: int | None,
    env: EnvSetting,
    live_order: list[int] | None,
    padded_choice: int | None,
) -> Verdict:
    """Combine the measured choice (best), the live order, and the rule (fallback).

    live_order and padded_choice come from the first GPU, as torch fixes the order once per process.
    """
    if not gpus:
        return Verdict("no-gpu", "no GPU visible, so attention never runs on cuDNN here")
    fix = None if env.deprioritizes else f"set {FIX} before the process starts"
    if padded_choice is not None:
        taken = backend_name(padded_choice)
        if padded_choice == CUDNN:
            return Verdict("exposed", f"a padded-mask bf16 attention takes cudnn: {EXPOSED_SYMPTOM}", fix)
        return Verdict("ok", f"a padded-mask bf16 attention takes {taken}, not cuDNN")
    if live_order:
        if live_order[0] == CUDNN:
            return Verdict("exposed", f"cuDNN is first in the live SDPA order: {EXPOSED_SYMPTOM}", fix)
        return Verdict("ok", f"cuDNN is not first in the live SDPA order ({backend_name(live_order[0])} is)")
    by_rule = {sm: cudnn_first_by_rule(torch_version, cudnn_version, sm, env) for sm in set(gpus)}
    exposed = sorted(sm_name(sm) for sm, first in by_rule.items() if first)
    if exposed:
        return Verdict(
            "exposed",
            f"by torch's rule cuDNN goes first on {', '.join(exposed)}: {EXPOSED_SYMPTOM}",
            fix,
        )
    if any(first is None for first in by_rule.values()):
        return Verdict("unknown", "the live order could not be read and a fact the rule needs is unknown")
    return Verdict("ok", "by torch's rule cuDNN is not first on these GPUs (live order not readable)")
