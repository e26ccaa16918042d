"""Before torchrun: whether the checkpoints the run keeps fit on the output folder's filesystem (one
checkpoint: an existing one's size, else 4 x model.pt), refused with the numbers when they do not,
rather than failing at a save hours in. FTENV_SPACE_CHECK=0 skips it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ftenv import variables

#: model.pt, model.pt.best, model.pt.avgN, and the temporary copy of the save in progress.
EXTRA_FILES = 4
ESTIMATE_FACTOR = 4
_GB = 1e9


def check(
    out: Path, model_pt: Path | None, keep: int, max_epoch: int, existing: Path | None, environ=None
) -> tuple[str | None, str]:
    """(the refusal, or None; a line for the log)."""
    if variables.read(variables.SPACE_CHECK, environ) == "0":
        return None, f"free-space check skipped ({variables.SPACE_CHECK}=0)"
    if existing is not None and existing.is_file():
        size, how = existing.stat().st_size, f"the size of {existing.name}"
    elif model_pt is not None and model_pt.is_file():
        size = ESTIMATE_FACTOR * model_pt.stat().st_size
        how = f"estimated: {ESTIMATE_FACTOR} x the model's model.pt"
    else:
        return None, "free-space check skipped (no checkpoint and no model.pt to size one by)"
    kept = (keep if keep > 0 else max_epoch) + EXTRA_FILES
    held = sum(p.stat().st_size for p in out.glob("model.pt*") if p.is_file()) if out.is_dir() else 0
    need = kept * size
    existing_parent = next(p for p in (out, *out.parents) if p.exists())  # a dry run creates nothing
    free = shutil.disk_usage(existing_parent).free
    numbers = (
        f"{kept} checkpoints ({kept - EXTRA_FILES} kept by keep_nbest_models + model.pt, .best, the "
        f"average and one being written) x {size / _GB:.3f} GB ({how}) = {need / _GB:.3f} GB; "
        f"{out} has {free / _GB:.3f} GB free and its checkpoints hold {held / _GB:.3f} GB"
    )
    if free + held < need:
        return (
            f"not enough space for this run's checkpoints: {numbers}. Free space, give another "
            "--output-dir, or keep fewer (++train_conf.keep_nbest_models=N); "
            f"{variables.SPACE_CHECK}=0 skips this check",
            numbers,
        )
    return None, f"free space: {numbers}"
