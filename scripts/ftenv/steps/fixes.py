"""What to do about slow steps, in plain words: the fixes the verdicts, the watchdog and the
self-check name. The SDPA part comes from ftenv.report.sdpa, the one home of that rule's wording."""

from __future__ import annotations

from ftenv.report import sdpa

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


def shape_fix(env: sdpa.EnvSetting | None = None) -> str:
    """The fix for slow steps on new shapes, using what is known of the variable: when it is
    already 1, do not lead with "set it to 1" but say how to find the other per-shape cost."""
    if env is None:
        return SHAPE_FIX
    if env.deprioritizes:
        return sdpa.already_deprioritized_text()
    return f"{SET_FIX} ({sdpa.RULE_TEXT})"


RECOMPILE_FIX = (
    "keep the compile dynamic over batch and length (ftenv finetune --compile uses dynamic=True; "
    "do not force dynamic=False or mark_static), or pad batches to a few fixed lengths; to rule "
    "it out, run without --compile (FTENV_COMPILE=0)"
)
