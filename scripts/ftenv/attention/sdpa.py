"""How torch picks the attention backend, whether a run is exposed, and the words for it: one home
of the rule, read from PyTorch's sdp_utils.cpp (check_prefer_cudnn_attention; cases and sources:
docs/cudnn-sdpa-guide.md). Pure logic, no torch import: the facts come in as arguments, so every
case is tested without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftenv import variables

FIX = f"{variables.SDPA_DEPRIORITIZED}=1"
FIX_2_9 = f"{variables.SDPA_PREFERRED}=0"
#: torch's SDPBackend codes, as torch._C._get_sdp_priority_order() and _fused_sdp_choice return them.
BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}
CUDNN = 3
#: Compute capabilities on which torch 2.10/2.11 prefers cuDNN attention.
PREFERRING_SM = frozenset({(9, 0), (10, 0), (10, 3)})
#: torch.backends.cudnn.version() must be above this (9.15.0) for the preference to apply.
CUDNN_PREFERRED_ABOVE = 91500
#: torch 2.9: the release, its GPUs, and the compile-time cuDNN it needs (PR #162073).
TORCH_2_9 = (2, 9)
PREFERRING_SM_2_9 = frozenset({(9, 0), (10, 0)})
CUDNN_COMPILED_MIN_2_9 = 90900
#: Builds whose compile-time cuDNN is public: 2.9 cu128 was compiled against 9.8 (pytorch#165801).
CUDNN_COMPILED_BY_BUILD = {(TORCH_2_9, "cu128"): 90800}
#: pytorch/pytorch#196678: cuDNN backward gives NaN grad_q with an attn_mask when
#: seq_len % 128 == 64; the kernel is fixed in the cuDNN library from 9.26 (PR #196861 moved the
#: wheels to cuDNN 9.26, with guards for <= 9.25.1). Keyed on the LOADED cuDNN: which torch
#: release carries the guards is not known from outside, and any torch can load any cuDNN.
#: torch.backends.cudnn.version()'s form (cudnn_version.h): the 9.26.0.51 wheel reads 92600.
NAN_GRAD_FIXED_CUDNN = 92600

# --- the wording, one place ----------------------------------------------------------------------
ISSUE_3704 = "FunASR issue #3704"
RULE_TEXT = (
    f"torch >= 2.10 puts cuDNN first on sm_90/sm_100/sm_103 when the cuDNN it loads is newer than "
    f"9.15.0, unless {FIX}; torch 2.9 does so on sm_90/sm_100 in builds compiled against cuDNN >= "
    f"9.9, unless {FIX_2_9}"
)
PLAN_BUILD_TEXT = (
    "cuDNN attention builds a new execution plan for every (batch, padded length) a process has "
    "not seen, and with cuDNN first every padded fp16/bf16 batch reaches it, as transformers "
    "passes an explicit attention mask"
)
COST_TEXT = f"about 1.05 s against 0.098 s a step on a B200 in {ISSUE_3704}: 59 of 382 steps"
NAN_RISK_TEXT = (
    "padded-mask training on cuDNN older than 9.26 can produce NaN gradients at lengths = 64 mod "
    "128 (pytorch/pytorch#196678)"
)
NAN_CORNER_CASE_TEXT = (
    "cuDNN 9.26 still gives NaN dK/dV in attention's backward pass in one reported corner case: a "
    "query of length 1 whose log-sum-exp is very negative (NVIDIA/cudnn-frontend#1072, open)"
)
EXPOSED_SYMPTOM = (
    "padded batches go to cuDNN attention, which builds a new plan for every (batch, padded "
    "length) it has not seen: expect training steps on new batch shapes to take several times "
    f"longer ({COST_TEXT})"
)
FIND_OTHER_COST_TEXT = (
    "`ftenv probe` measures what one new shape costs under the current settings, and the "
    "watchdog's phases (forward, backward, data) on the slow steps show where the time goes; "
    "common per-shape costs are torch.compile recompiling, cudnn.benchmark autotuning and code "
    "that puts cuDNN first itself (sdpa_kernel with set_priority); pad batches to a few fixed "
    "lengths"
)


def already_deprioritized_text() -> str:
    """What to say when new shapes are slow although the variable is already 1."""
    return f"{FIX} is already set, so the per-shape cost comes from something else: {FIND_OTHER_COST_TEXT}"


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
    """'2.11.0+cu130' -> (2, 11); None when it cannot be read. PEP 440 as packaging reads it,
    called here rather than through ftenv.stack.versions so that the rule imports nothing of
    ftenv (it sits on the lowest floor: every wing above reads it)."""
    from packaging.version import InvalidVersion, Version  # in the lock; only callers pay the import

    try:
        numbers = Version(version.strip()).release if version else ()
    except InvalidVersion:
        return None
    return (*numbers, 0)[:2] if numbers else None


def torch_build(version: str | None) -> str | None:
    """'2.9.1+cu128' -> 'cu128'; None without a local tag."""
    if not version or "+" not in version:
        return None
    return version.split("+", 1)[1]


@dataclass(frozen=True)
class DeprioritizedSetting:
    """What torch makes of the variable's raw value."""

    raw: str | None
    state: str  # "unset", "deprioritized", "prefer-cudnn", "ignored"
    meaning: str

    @property
    def deprioritizes(self) -> bool:
        return self.state == "deprioritized"


def interpret_deprioritized(raw: str | None) -> DeprioritizedSetting:
    """torch reads the variable with c10::utils::check_env: only "1" and "0" mean anything."""
    if raw is None:
        return DeprioritizedSetting(raw, "unset", "unset: torch's default order applies")
    if raw == "1":
        return DeprioritizedSetting(raw, "deprioritized", "cuDNN attention is not moved to the front")
    if raw == "0":
        return DeprioritizedSetting(raw, "prefer-cudnn", "explicitly asks torch to prefer cuDNN attention")
    return DeprioritizedSetting(
        raw,
        "ignored",
        f"torch ignores {raw!r} (only 1 or 0 are read; it prints 'Ignoring invalid value for "
        f"boolean flag') and behaves as if unset. Fix: set {FIX} exactly",
    )


def setting_meaning(torch_version: str | None, setting: DeprioritizedSetting) -> str:
    """What the variable does under this torch: nothing in 2.9, which reads TORCH_CUDNN_SDPA_PREFERRED."""
    if torch_release(torch_version) == TORCH_2_9:
        return f"not read by torch 2.9, whose opt-out is {FIX_2_9}"
    return setting.meaning


def cudnn_first_by_rule(
    torch_version: str | None,
    cudnn_version: int | None,
    sm: tuple[int, int],
    setting: DeprioritizedSetting,
    *,
    cudnn_compiled: int | None = None,
    preferred_raw: str | None = None,
) -> bool | None:
    """Whether torch puts cuDNN first on this GPU; None when a needed fact is unknown.
    cudnn_compiled and preferred_raw (TORCH_CUDNN_SDPA_PREFERRED) matter for torch 2.9 only."""
    release = torch_release(torch_version)
    if release is None:
        return None
    if release < TORCH_2_9:
        return False
    if release == TORCH_2_9:
        if sm not in PREFERRING_SM_2_9 or preferred_raw == "0":
            return False
        compiled = cudnn_compiled or CUDNN_COMPILED_BY_BUILD.get((release, torch_build(torch_version)))
        return None if compiled is None else compiled >= CUDNN_COMPILED_MIN_2_9
    if sm not in PREFERRING_SM or setting.deprioritizes:
        return False
    if cudnn_version is None:
        return None
    return cudnn_version > CUDNN_PREFERRED_ABOVE


def reason_not_first(
    torch_version: str | None,
    cudnn_version: int | None,
    arches: tuple[tuple[int, int], ...] | list[tuple[int, int]],
    setting: DeprioritizedSetting,
) -> str:
    """Plain words for cudnn_first_by_rule(...) being False, in the rule's own terms."""
    release = torch_release(torch_version)
    if release is not None and release < TORCH_2_9:
        return f"torch {torch_version} never puts cuDNN first"
    names = "/".join(sm_name(a) for a in arches)
    if release == TORCH_2_9:
        if arches and not any(a in PREFERRING_SM_2_9 for a in arches):
            return f"torch 2.9 puts cuDNN first on sm_90/sm_100 only, not {names}"
        return f"this torch 2.9 build was compiled against cuDNN older than 9.9 (or {FIX_2_9} is set)"
    if setting.deprioritizes:
        return f"{FIX} is set"
    if arches and not any(a in PREFERRING_SM for a in arches):
        return f"{names} is not one of the GPUs where torch prefers cuDNN (sm_90/sm_100/sm_103)"
    return f"cuDNN {cudnn_name(cudnn_version)} is not newer than 9.15.0"


def fix_text(torch_version: str | None, setting: DeprioritizedSetting) -> str | None:
    """The setting that keeps cuDNN off the front for this torch; None when it is already set."""
    if torch_release(torch_version) == TORCH_2_9:
        not_read = f"{variables.SDPA_DEPRIORITIZED} is not read by torch 2.9"
        return f"set {FIX_2_9} before the process starts ({not_read})"
    if setting.deprioritizes:
        return None
    return f"set {FIX} before the process starts"


def nan_risk(
    torch_version: str | None, setting: DeprioritizedSetting, cudnn_version: int | None
) -> str | None:
    """The NaN warning where cuDNN may run the backward pass: pytorch#196678 below cuDNN 9.26 (or
    unknown), from 9.26 on only the corner case still reported; none with the variable at 1 (torch
    2.9 does not read it)."""
    if setting.deprioritizes and torch_release(torch_version) != TORCH_2_9:
        return None
    fixed = cudnn_version is not None and cudnn_version >= NAN_GRAD_FIXED_CUDNN
    return NAN_CORNER_CASE_TEXT if fixed else NAN_RISK_TEXT


@dataclass(frozen=True)
class Exposure:
    """One line for the report: exposed to per-shape cuDNN plan builds, or not, and why."""

    level: str  # "ok", "exposed", "unknown", "no-gpu"
    reason: str
    fix: str | None = None
    #: A correctness risk that comes with cuDNN first (one line), or None.
    risk: str | None = None

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


def exposure(
    *,
    gpus: list[tuple[int, int]],
    torch_version: str | None,
    cudnn_version: int | None,
    setting: DeprioritizedSetting,
    live_order: list[int] | None,
    padded_choice: int | None,
    cudnn_compiled: int | None = None,
    preferred_raw: str | None = None,
) -> Exposure:
    """Combine the measured choice (best), the live order, and the rule (fallback).

    live_order and padded_choice come from the first GPU, as torch fixes the order once per process.
    """
    if not gpus:
        return Exposure("no-gpu", "no GPU visible, so attention never runs on cuDNN here")
    fix = fix_text(torch_version, setting)
    if fix is None:  # the variable is already 1: whatever puts cuDNN first, it is not the default
        fix = already_deprioritized_text()
    risk = nan_risk(torch_version, setting, cudnn_version)

    def exposed(reason: str) -> Exposure:
        return Exposure("exposed", f"{reason}: {EXPOSED_SYMPTOM}", fix, risk)

    if padded_choice is not None:
        if padded_choice == CUDNN:
            return exposed("a padded-mask bf16 attention takes cudnn")
        return Exposure("ok", f"a padded-mask bf16 attention takes {backend_name(padded_choice)}, not cuDNN")
    if live_order:
        if live_order[0] == CUDNN:
            return exposed("cuDNN is first in the live SDPA order")
        return Exposure("ok", f"cuDNN is not first in the live SDPA order ({backend_name(live_order[0])} is)")
    by_rule = {
        sm: cudnn_first_by_rule(
            torch_version,
            cudnn_version,
            sm,
            setting,
            cudnn_compiled=cudnn_compiled,
            preferred_raw=preferred_raw,
        )
        for sm in set(gpus)
    }
    first_on = sorted(sm_name(sm) for sm, first in by_rule.items() if first)
    if first_on:
        return exposed(f"by torch's rule cuDNN goes first on {', '.join(first_on)}")
    unknown_on = sorted(sm_name(sm) for sm, first in by_rule.items() if first is None)
    if unknown_on:
        return Exposure(
            "unknown",
            f"possibly affected on {', '.join(unknown_on)}: the live order could not be read and a fact "
            f"the rule needs is unknown ({RULE_TEXT})",
            fix,
            risk,
        )
    return Exposure("ok", "by torch's rule cuDNN is not first on these GPUs (live order not readable)")
