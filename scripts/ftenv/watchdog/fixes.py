"""What to do about slow steps, in plain words: one home for the verdicts, the watchdog and the self-check."""

from __future__ import annotations

from dataclasses import dataclass

from ftenv import variables
from ftenv.attention import sdpa

SET_FIX = f"set {sdpa.FIX} in the training process's environment before it starts"
#: The per-shape fix when the variable's value is not known.
SHAPE_FIX = f"{SET_FIX} ({sdpa.RULE_TEXT}); if it is already 1: {sdpa.FIND_OTHER_COST_TEXT}"
DATA_FIX = (
    "the DataLoader falls behind: raise dataset_conf.num_workers, give the container a larger "
    "/dev/shm (--ipc=host or --shm-size=16g), or move the data to faster storage"
)
#: When new shapes are slow but cuDNN attention is not first.
REPEAT_SHAPES_FIX = (
    "make shapes repeat: pad batches to a few fixed lengths (bucketing); with torch.compile, "
    "mark the sequence dimension dynamic"
)


@dataclass(frozen=True)
class Fix:
    """A fix as the verdicts print it: one short line, and the full text below it."""

    short: str
    full: str


def shape_fix(
    deprioritized: sdpa.DeprioritizedSetting | None = None,
    compiled: tuple[str, ...] | None = None,
    cudnn_first: bool | None = None,
) -> Fix:
    """The fix for slow steps on new shapes, using what is known of the run (the live watchdog
    reads the training process's environment; `ftenv analyze` the start-up report in the log):
    never "set the variable to 1" when it is already 1, the compile's recompiling when the
    decoder is compiled, padding when torch's rule does not put cuDNN attention first."""
    if deprioritized is not None and deprioritized.deprioritizes:
        if compiled:
            return Fix(
                f"{sdpa.FIX} is already set and the decoder is compiled: most likely torch.compile "
                "recompiling for new shapes; keep it dynamic or pad batches to a few lengths",
                f"{sdpa.already_deprioritized_text()}; with compile on: {RECOMPILE_FIX}",
            )
        return Fix(
            f"{sdpa.FIX} is already set: find the other per-shape cost (`ftenv probe`, the slow "
            "steps' phases)",
            sdpa.already_deprioritized_text(),
        )
    if compiled and cudnn_first is False:
        return Fix("keep torch.compile dynamic, or pad batches to a few lengths", RECOMPILE_FIX)
    if cudnn_first is False:
        return Fix(
            "pad batches to a few fixed lengths: cuDNN attention is not first on this GPU and stack",
            REPEAT_SHAPES_FIX,
        )
    if deprioritized is None:
        return Fix(f"{SET_FIX} (if it is already 1: below)", SHAPE_FIX)
    return Fix(SET_FIX, f"{SET_FIX} ({sdpa.RULE_TEXT})")


DATA_LOADER_FIX = Fix("the DataLoader falls behind: more workers, a larger /dev/shm", DATA_FIX)


RECOMPILE_FIX = (
    "keep the compile dynamic over batch and length (ftenv finetune --compile uses dynamic=True; "
    "do not force dynamic=False or mark_static), or pad batches to a few fixed lengths; to rule "
    f"it out, run without --compile ({variables.COMPILE}=0)"
)
