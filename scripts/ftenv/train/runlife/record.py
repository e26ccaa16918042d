"""What the launcher and the trainer processes share: the variables the launcher sets for them and the
stop record rank 0 leaves, because torchrun exits 1 both for a stop and for a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ftenv import variables

#: Set by `ftenv finetune` for torchrun and every rank: the run's output folder.
#: Set by ftenv.train.runlife.torchrun for its workers: which launch a stop record belongs to.
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
    write_json_atomic(path, {**data, "run_id": os.environ.get(variables.RUN_ID, "")})
    return path


def read_stop(output_dir: str | os.PathLike | None, run_id: str | None = None) -> dict | None:
    """The stop record of this launch (run_id), or any when run_id is None; None if there is none."""
    if not output_dir:
        return None
    try:
        data = json.loads((Path(output_dir) / STOP_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or (run_id is not None and data.get("run_id") != run_id):
        return None
    return data


def stop_line(data: dict) -> str:
    """The one line that says what happened and what to do."""
    return (
        f"stopped on {data.get('signal')} at epoch {data.get('epoch')} step {data.get('step')} "
        f"(batches done in that epoch); saved to {data.get('file')}; run the same command again "
        "to continue"
    )
