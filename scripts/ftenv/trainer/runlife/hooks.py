"""FunASR's Trainer changed at run time in each training process (never in site-packages): a stop at
a step boundary saved through FunASR's own save_checkpoint, a resume step count that survives a
second resume in one epoch, atomic torch.save, and a time limit on the closing barrier. Every hook
into FunASR's internals is here; tests/ftenv/trainer/test_runlife_hooks.py fails when the pinned
code they rely on changes.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import sys
import threading

from ftenv import upstream, variables
from ftenv.model.folder import WEIGHTS
from ftenv.outcome import STOPPED, stop_line
from ftenv.trainer.runlife import atomic, failfast, record
from ftenv.trainer.runlife.signals import BoundaryLoader, StopRequest, agree

log = logging.getLogger(__name__)


class RunState:
    """Where the run is, as far as saving goes: (epoch, data slice, step) of the last checkpoint
    written or loaded, and the slice's first step in this process."""

    def __init__(self) -> None:
        self.stop = StopRequest(STOPPED)
        self.saved_at: tuple[int, int, int] | None = None
        self.slice_start = 0
        self.absolute_step = False  # our own save passes the step from the slice's start


def _say(text: str) -> None:
    print(f"ftenv: {text}", file=sys.stderr, flush=True)


def _leave(code: int) -> None:
    """End this process now, its logs flushed: its part is saved, and a normal interpreter exit
    (tearing down torch, transformers and FunASR, joining their threads) took seconds on a busy
    machine, out of the launcher's grace period."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _position(epoch, step, data_split_i) -> tuple[int, int, int]:
    """FunASR's epoch-end save is save_checkpoint(epoch + 1) without a step: epoch + 1, slice 0, 0."""
    return (int(epoch), int(data_split_i or 0), int(step or 0))


def _wrap_save(trainer_cls, state: RunState) -> None:
    original = trainer_cls.save_checkpoint

    @functools.wraps(original)
    def save_checkpoint(self, epoch, step=None, *args, **kwargs):
        if step is not None and not state.absolute_step:
            step = state.slice_start + step
        original(self, epoch, step, *args, **kwargs)
        state.saved_at = _position(epoch, step, kwargs.get("data_split_i", 0) if step is not None else 0)

    trainer_cls.save_checkpoint = save_checkpoint


def _wrap_resume(trainer_cls, state: RunState) -> None:
    original = trainer_cls.resume_checkpoint

    @functools.wraps(original)
    def resume_checkpoint(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if os.path.isfile(os.path.join(self.output_dir, WEIGHTS)) and self.resume:
            state.saved_at = _position(self.start_epoch, self.start_step, self.start_data_split_i)

    trainer_cls.resume_checkpoint = resume_checkpoint


def _stop(trainer, state: RunState, signum: int, args: dict, done: int) -> None:
    """Every rank: save (if the position is not saved yet) and exit STOPPED."""
    import signal

    import torch.distributed as dist

    epoch, split = args["epoch"], args["data_split_i"]
    step = state.slice_start + done
    name = signal.Signals(signum).name
    here = _position(epoch, step, split)
    ckpt = os.path.join(trainer.output_dir, WEIGHTS)
    if state.saved_at != here:
        state.absolute_step = True
        trainer.save_checkpoint(
            epoch,
            step=step,
            model=args["model"],
            optim=args["optim"],
            scheduler=args["scheduler"],
            scaler=args["scaler"],
            step_in_epoch=trainer.step_in_epoch,
            data_split_i=split,
            data_split_num=args["data_split_num"],
            train_loss_avg=trainer.train_loss_avg,
            train_acc_avg=trainer.train_acc_avg,
        )
        saved = f"{ckpt} (and model.pt.ep{epoch}.{trainer.step_in_epoch})"
    else:
        saved = f"{ckpt} (already there: nothing trained since it was saved)"
    if trainer.rank == 0:
        data = {
            "signal": name,
            "epoch": int(epoch),
            "step": int(step),
            "data_split_i": int(split),
            "file": saved,
            "saved_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        record.write_stop(trainer.output_dir, data)
        _say(stop_line(data))
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    _leave(STOPPED)


def _wrap_train_epoch(trainer_cls, state: RunState) -> None:
    original = trainer_cls.train_epoch

    @functools.wraps(original)
    def train_epoch(self, model=None, optim=None, scheduler=None, scaler=None, dataloader_train=None,
                    dataloader_val=None, epoch=None, **kwargs):  # fmt: skip
        state.slice_start = int(kwargs.get("start_step") or 0)
        state.absolute_step = False
        state.stop.in_loop = True
        args = {
            "model": model, "optim": optim, "scheduler": scheduler, "scaler": scaler, "epoch": epoch,
            "data_split_i": kwargs.get("data_split_i", 0), "data_split_num": kwargs.get("data_split_num", 1),
        }  # fmt: skip
        accum = max(int(getattr(self, "accum_grad", 1) or 1), 1)

        def on_boundary(done: int) -> None:
            if done % accum:
                return
            signum = agree(state.stop.pending, self.device)
            if signum:
                _stop(self, state, signum, args, done)

        loader = BoundaryLoader(dataloader_train, on_boundary)
        parts = {"model": model, "optim": optim, "scheduler": scheduler, "scaler": scaler}
        return original(
            self, **parts, dataloader_train=loader, dataloader_val=dataloader_val, epoch=epoch, **kwargs
        )

    trainer_cls.train_epoch = train_epoch


def close_timeout_s(environ=None) -> float:
    return variables.read_seconds(variables.CLOSE_TIMEOUT_S, "the closing barrier's limit", environ)


def _kept(output_dir: str) -> str:
    try:
        names = sorted(n for n in os.listdir(output_dir) if n.startswith(WEIGHTS))
    except OSError:
        return f"the checkpoints in {output_dir} are kept"
    avg = [n for n in names if ".avg" in n]
    return f"the {len(names)} checkpoints in {output_dir} are kept ({', '.join(['model.pt', *avg][:4])})"


def _bound_close(trainer_cls, seconds: float) -> str:
    """FunASR's main() ends, after the last save and average_checkpoints, with trainer.close(): a
    barrier with every rank, then destroy_process_group. A peer that never arrives (gone, or stuck)
    held the job there until the collective timeout or the job's time limit, with nothing left to
    do: past `seconds`, this process ends with exit 0 (its part is done and saved; a peer's failure
    is the peer's exit code, which torchrun reports)."""
    original = getattr(trainer_cls, "close", None)
    if not callable(original):
        return "closing barrier: not bounded (FunASR's Trainer has no close())"
    hang = variables.read(variables.TEST_CLOSE_HANG_RANK)

    @functools.wraps(original)
    def close(self, *args, **kwargs):
        def give_up() -> None:
            _say(
                f"FunASR's trainer.close() (a barrier with every rank, then destroy_process_group) did not "
                f"return in {seconds:g} s ({variables.CLOSE_TIMEOUT_S}): training is over and "
                f"{_kept(self.output_dir)}; rank {self.rank} ends here (exit 0)"
            )
            _leave(0)

        timer = threading.Timer(seconds, give_up)
        timer.daemon = True
        timer.start()
        try:
            if hang is not None and hang.strip() == str(self.rank):  # TEST AID: a peer that never comes
                threading.Event().wait()
            return original(self, *args, **kwargs)
        finally:
            timer.cancel()

    trainer_cls.close = close
    aid = f"; TEST AID: rank {hang} never reaches it" if hang is not None else ""
    return f"closing barrier: at most {seconds:g} s after the last save ({variables.CLOSE_TIMEOUT_S}){aid}"


def install() -> list[str]:
    """Install everything on FunASR's Trainer in this process; returns the lines for the log."""
    from funasr.train_utils import trainer_ds

    if refused := upstream.refusal(upstream.RUN_LIFE):  # the stop needs the wrapped epoch loop
        return [refused, atomic.install(), failfast.install()]
    state = RunState()
    notes = [state.stop.install(), atomic.install(), failfast.install()]
    notes.append(_bound_close(trainer_ds.Trainer, close_timeout_s()))
    _wrap_save(trainer_ds.Trainer, state)
    _wrap_resume(trainer_ds.Trainer, state)
    _wrap_train_epoch(trainer_ds.Trainer, state)
    notes.append("saved step: counted from the start of the epoch's data slice")
    return notes
