"""The words of the watchdog's slow-step lines, shared by `ftenv watch` and the step timer so that
both say the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftenv import text, variables
from ftenv.attention import sdpa
from ftenv.attention.process_settings import AttentionSettings
from ftenv.watchdog import fixes
from ftenv.watchdog.detector import SlowEvent
from ftenv.watchdog.line_mark import INDENT, PREFIX
from ftenv.watchdog.step import DATA, NO_SHAPE, RECOMPILE, SEEN_SHAPE, Step, waits_text

_PHASE_NAMES = {
    "data_load": "data",
    "forward_time": "forward",
    "backward_time": "backward",
    "optim_time": "optim",
}


@dataclass(frozen=True)
class Explanation:
    label: str  # the likely cause, a few words
    short_fix: str | None  # the fix, a few words
    cause: str  # the long explanation
    fix: str | None  # the long fix


def shape_text(step: Step, short: bool = False) -> str:
    if step.shape is None:
        return "batch shape unknown"
    if short:
        novelty = {True: "new to this rank", False: "seen on this rank", None: "?"}[step.new_shape]
        return f"batch {step.batch} x {step.padded_len}, {novelty}"
    novelty = {True: "new to this rank", False: "seen before on this rank", None: "?"}[step.new_shape]
    return f"batch {step.batch} x {step.padded_len} padded tokens ({novelty})"


def phases_text(step: Step) -> str:
    parts = [f"{_PHASE_NAMES[k]} {v:.3f}" for k, v in step.phases if k in _PHASE_NAMES]
    return ", ".join(parts)


def _per_shape(event: SlowEvent, settings: AttentionSettings | None, lead: str, label: str) -> Explanation:
    """A new shape (this rank's, or another rank's that this one waited for)."""
    fix_var = fixes.SET_FIX
    if variables.read(variables.IMAGE) and settings is not None and not settings.deprioritized.deprioritizes:
        fix_var += " (this image sets it to 1: something overrode it)"
    plan = f"{sdpa.PLAN_BUILD_TEXT} ({sdpa.COST_TEXT})"
    first = settings.cudnn_first if settings is not None else None
    if first:
        why = "cuDNN is first in torch's attention order here"
        if settings.deprioritized.state == "prefer-cudnn":
            why += f" ({variables.SDPA_DEPRIORITIZED}=0 asks for it)"
        elif settings.deprioritized.state == "ignored":
            setting = text.assignment(variables.SDPA_DEPRIORITIZED, settings.deprioritized.raw)
            why += f" ({setting} is ignored by torch: only 1 works)"
        return Explanation(label, f"set {sdpa.FIX}", f"{lead}{why}; {plan}", fix_var)
    if first is None:
        unknown = ", ".join(settings.unknown_facts()) if settings is not None else "the settings"
        return Explanation(
            label if event.waits is not None else f"{label} (not confirmed)",
            f"set {sdpa.FIX}",
            f"{lead}most likely {plan}: {sdpa.RULE_TEXT} "
            f"(not confirmed here: {unknown or 'the rule'} unknown)",
            fix_var,
        )
    fix = (
        sdpa.already_deprioritized_text() if settings.deprioritized.deprioritizes else fixes.REPEAT_SHAPES_FIX
    )
    return Explanation(
        "a per-shape cost other than cuDNN attention",
        "pad batches to a few fixed lengths",
        f"{lead}but cuDNN attention is not first here ({settings.why_not_first()}), so it is another "
        "per-shape cost: torch.compile recompiling, cudnn.benchmark autotuning, or the memory "
        "allocator growing for a larger batch",
        fix,
    )


def explain(event: SlowEvent, settings: AttentionSettings | None) -> Explanation:
    """Why this step was slow and what to do, short and long."""
    step = event.step
    if event.cause == DATA:
        return Explanation(
            "data loading",
            "more DataLoader workers, larger /dev/shm",
            f"data loading took {step.data_load:.3f} s of it: the DataLoader did not keep up",
            fixes.DATA_FIX,
        )
    if event.waits is not None:
        who = waits_text(event.waits)
        lead = (
            f"its shape was seen before on this rank and it {who}: in DDP every rank waits in the "
            "gradient all-reduce for the slowest one, so a new shape on one rank slows every rank's "
            "step (here in backward_time); "
        )
        return _per_shape(event, settings, lead, who)
    if event.cause == SEEN_SHAPE:
        return Explanation(
            "not shape-related (shape seen before)",
            None,
            "its batch shape was seen before on this rank, so it is not a per-shape plan build; "
            "something else held the step (another process on the GPU or CPU, garbage collection, "
            "a synchronising call, I/O)",
            "none known from the log; if it keeps happening, look at `nvidia-smi` and the host load",
        )
    if event.cause == RECOMPILE:
        return Explanation(
            "torch.compile recompiling",
            "keep the compile dynamic, or pad to a few lengths",
            "torch.compile recompiled for this new (batch, padded length): Dynamo logged "
            "'Recompiling function' just before it, so the compiled graph was specialised to earlier "
            "shapes",
            fixes.RECOMPILE_FIX,
        )
    if event.cause == NO_SHAPE:
        return Explanation(
            "unknown (no batch shape in the log)",
            None,
            "the log line carries no batch shape, so the per-shape cause cannot be tested",
            None,
        )
    return _per_shape(
        event, settings, "the step is the first with this shape on this rank; ", "cuDNN attention plan build"
    )


def first_lines(event: SlowEvent, settings: AttentionSettings | None) -> list[str]:
    """The first slow step of a cause: the short line, then the long explanation, indented."""
    step = event.step
    e = explain(event, settings)
    head = (
        f"{PREFIX} SLOW STEP rank {step.rank} step {step.index}: {step.seconds:.3f} s = "
        f"{event.ratio:.1f}x median {event.baseline:.3f} s; {shape_text(step, short=True)}; "
        f"likely: {e.label}; fix: {e.short_fix or 'none known'}"
    )
    phases = phases_text(step)
    attention = settings.line() if settings is not None else "unknown"
    detail = f"{INDENT}{f'phases: {phases}; ' if phases else ''}attention: {attention}. Cause: {e.cause}."
    detail += f" Fix: {e.fix or 'none known'}."
    if event.earlier_slow:
        detail += (
            f" Before it, {event.earlier_slow} earlier steps of rank {step.rank} were as slow "
            f"({event.earlier_slow_new} on new shapes), too early to judge."
        )
    return [head, detail]


def short_line(event: SlowEvent) -> str:
    step = event.step
    tail = waits_text(event.waits) if event.waits is not None else "same cause as above"
    return (
        f"{PREFIX} slow step rank {step.rank} step {step.index}: {step.seconds:.3f} s = "
        f"{event.ratio:.1f}x the running median; {shape_text(step)}: {tail}"
    )
