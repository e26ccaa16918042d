"""Before torchrun: what the output folder holds (fresh, resuming, finished), said in one line and
made ready, because FunASR's resume loads model.pt silently and fails for good on one that does
not load.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ftenv.data import writes
from ftenv.model.checkpoints import EPOCH_OR_STEP as EPOCH_FILE
from ftenv.model.folder import WEIGHTS as LATEST
from ftenv.trainer.runlife.record import STOP_RECORD, TEMP_MARK, TEMP_PREFIX, temp_name


@dataclass
class Checkpoint:
    path: Path
    epoch: int
    step: int
    saved: str
    size: int

    def describe(self) -> str:
        return f"{self.path.name}: epoch {self.epoch}, step {self.step} (saved {self.saved})"


@dataclass
class FolderState:
    kind: str  # "fresh", "resume", "finished", "done" (finished, found by a restart), "broken"
    line: str
    checkpoint: Checkpoint | None = None
    relink: Checkpoint | None = None  # becomes model.pt before the launch
    unreadable: list[str] = field(default_factory=list)
    temps: list[Path] = field(default_factory=list)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")


def read_checkpoint(path: Path) -> Checkpoint | str:
    """The checkpoint's position, or why it does not load (as FunASR loads it: torch.load)."""
    import torch

    try:
        data = torch.load(path, map_location="cpu", mmap=True)
        epoch, step = int(data["epoch"]), int(data.get("step") or 0)
    except Exception as exc:  # a cut file fails in many ways: zip, pickle, missing keys
        first = (str(exc).splitlines() or [""])[0].split(". ")[0][:160]
        return f"{type(exc).__name__}: {first}"
    st = path.stat()
    saved = datetime.datetime.fromtimestamp(st.st_mtime, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Checkpoint(path, epoch, step, saved, st.st_size)


def _epoch_files(out: Path) -> list[Path]:
    """model.pt.epE[.S], newest position first (epoch-end files: ep{E} is (E, 0))."""
    found = []
    for p in out.iterdir() if out.is_dir() else ():
        m = EPOCH_FILE.match(p.name)
        if m and p.is_file():
            found.append(((int(m.group(1)), int(m.group(2) or 0)), p))
    return [p for _, p in sorted(found, reverse=True)]


def inspect(out: Path, max_epoch: int, resume: bool = True, restart: str | None = None) -> FolderState:
    """Read the folder; change nothing (prepare() does). `restart`: why the launcher says this start
    is a restart of the same job (ftenv.launch.cluster_env.restart_of); a finished run found then is
    "done" (a preemption after the last save: the job's work is complete), on a first start it is
    "finished" (refused: the user must choose)."""
    temps = [p for p in out.glob(f"{TEMP_PREFIX}model.pt*{TEMP_MARK}*")] if out.is_dir() else []
    if not resume:
        return FolderState(
            "fresh", "a fresh run (train_conf.resume=false: checkpoints here are not read)", temps=temps
        )
    latest = out / LATEST
    epoch_files = _epoch_files(out)
    if not latest.exists() and not epoch_files:
        return FolderState("fresh", f"a fresh run (no checkpoint in {out})", temps=temps)
    unreadable: list[str] = []
    chosen = relink = None
    if latest.exists():
        got = read_checkpoint(latest)
        if isinstance(got, Checkpoint):
            chosen = got
        else:
            unreadable.append(f"{LATEST} does not load ({got})")
    if chosen is None:
        for p in epoch_files:
            got = read_checkpoint(p)
            if isinstance(got, Checkpoint):
                chosen = relink = got
                break
            unreadable.append(f"{p.name} does not load ({got})")
    if chosen is None:
        return FolderState(
            "broken",
            f"no checkpoint in {out} loads: {'; '.join(unreadable)}. Start over with --fresh (the "
            "files move to a replaced-<time>/ folder) or give another --output-dir",
            unreadable=unreadable,
            temps=temps,
        )
    if chosen.epoch >= max_epoch and chosen.step == 0 and restart is not None:
        return FolderState(
            "done",
            f"the run finished at {chosen.saved} ({chosen.path.name}: the end of epoch {chosen.epoch} "
            f"of {max_epoch}), nothing left to do ({restart}: this start is a restart of the job)",
            chosen,
            temps=temps,
        )
    if chosen.epoch >= max_epoch and chosen.step == 0:
        return FolderState(
            "finished",
            f"{out} holds a finished run: {chosen.describe()}, the end of epoch {chosen.epoch} of "
            f"{max_epoch}; nothing is left to train. To train on, ask for more epochs "
            f"(++train_conf.max_epoch=N, N > {chosen.epoch}); to start over in this folder, add "
            "--fresh (the old checkpoints move to a replaced-<time>/ folder); or give another --output-dir",
            chosen,
            temps=temps,
        )
    line = f"resuming from {chosen.describe()}"
    if relink is not None:
        line = f"{'; '.join(unreadable)}: kept aside as {LATEST}.unreadable-<time>; {line} instead"
    return FolderState("resume", line, chosen, relink, unreadable, temps)


def prepare(out: Path, state: FolderState) -> list[str]:
    """Do what the launch needs: remove leftover temporary files, put a loadable model.pt in place."""
    notes = []
    for tmp in state.temps:
        with contextlib.suppress(OSError):
            tmp.unlink()
            notes.append(f"removed {tmp.name}, left by a save that was cut short")
    if state.relink is not None:
        latest = out / LATEST
        if latest.exists():
            latest.rename(out / f"{LATEST}.unreadable-{_now()}")
        tmp = Path(temp_name(str(latest)))
        try:
            os.link(state.relink.path, tmp)
        except OSError:  # a filesystem without hard links: copy
            shutil.copy2(state.relink.path, tmp)
        os.replace(tmp, latest)
    return notes


def model_dir_problem(out: Path, model_dir: Path) -> str | None:
    """Why --output-dir cannot be where it is: the same as --model-dir, inside it or holding it. The
    trainer writes model.pt there and --fresh moves model.pt* aside, which would take the released
    weights the run starts from; refused before anything is made or moved."""
    try:
        writes.refuse_clobber(
            [("--output-dir", out)], [("--model-dir", model_dir)], "give another --output-dir"
        )
    except writes.ClobberError as exc:
        return str(exc).replace("nothing was written", "nothing was changed")
    return None


def start_over(out: Path) -> str | None:
    """--fresh: move this folder's checkpoints (and the stop record) to replaced-<time>/."""
    names = (
        [p for p in out.iterdir() if p.name.startswith(LATEST) or p.name == STOP_RECORD]
        if out.is_dir()
        else []
    )
    if not names:
        return None
    dest = out / f"replaced-{_now()}"
    dest.mkdir()
    for p in names:
        p.rename(dest / p.name)
    return f"--fresh: {len(names)} files of the earlier run moved to {dest}"
