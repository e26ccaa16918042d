"""What the launcher and the trainer processes share: the stop record rank 0 leaves, because torchrun
exits 1 both for a stop and for a crash, and the temporary names of atomic writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ftenv import variables

#: Rank 0 writes it (atomically) after the stop's checkpoint is saved.
STOP_RECORD = "ftenv-stop.json"
#: Prefix of the temporary files of atomic writes (a dot: FunASR's averaging lists `model.pt.e*`).
TEMP_PREFIX = "."
TEMP_MARK = ".tmp-"


def temp_name(path: str) -> str:
    """The temporary name a file is written under before it is renamed to `path`."""
    head, tail = os.path.split(path)
    return os.path.join(head, f"{TEMP_PREFIX}{tail}{TEMP_MARK}{os.getpid()}")


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = temp_name(str(path))
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_stop(output_dir: str | os.PathLike, data: dict) -> Path:
    path = Path(output_dir) / STOP_RECORD
    write_json_atomic(path, {**data, "run_id": variables.read(variables.RUN_ID) or ""})
    return path


def read_stop(
    output_dir: str | os.PathLike | None, run_id: str | None = None, since: float | None = None
) -> dict | None:
    """The stop record of this launch, or None. Without run_id and since: any record. With them: one
    written by this launch (run_id, this node's torchrun) or after `since` (a time.time() taken
    when this node's launch began: the record rank 0 wrote on another node of the same launch, which
    shares the output folder but not the run id)."""
    if not output_dir:
        return None
    path = Path(output_dir) / STOP_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        written = path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if run_id is None and since is None:
        return data
    if run_id is not None and data.get("run_id") == run_id:
        return data
    if since is not None and written >= since:
        return data
    return None
