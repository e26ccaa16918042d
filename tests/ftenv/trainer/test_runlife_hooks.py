"""The pinned FunASR code the run-life hooks (ftenv.trainer.runlife.hooks) rely on: when an upgrade
changes it, this fails and names what to check, instead of a hook that silently no longer applies."""

from __future__ import annotations

import inspect
import re

import pytest

trainer_ds = pytest.importorskip("funasr.train_utils.trainer_ds")
train_ds = pytest.importorskip("funasr.bin.train_ds")


def test_the_run_ends_with_close_after_the_last_save_and_averaging():
    """_bound_close limits trainer.close() because it is the last thing main() does, after the final
    save_checkpoint and average_checkpoints: past them, nothing of the run is left unsaved."""
    body = inspect.getsource(train_ds.main)
    tail = body[body.rindex("trainer.save_checkpoint(") :]
    assert re.search(r"average_checkpoints\([^)]*\)\s*trainer\.close\(\)\s*$", tail), tail


def test_close_is_a_barrier_then_destroy_process_group():
    """What the bound covers: a barrier with every rank (a peer that never comes holds it) and the
    process group's teardown; nothing that saves."""
    source = inspect.getsource(trainer_ds.Trainer.close)
    assert "dist.barrier()" in source and "destroy_process_group()" in source, source
    assert "save" not in source, source


def test_the_hooked_methods_take_what_the_hooks_pass():
    """hooks.py wraps these methods by these argument names."""
    loop = ("model", "optim", "scheduler", "scaler", "dataloader_train", "dataloader_val", "epoch")
    for method, names in {
        "save_checkpoint": ("epoch", "step"),
        "resume_checkpoint": (),
        "train_epoch": loop,
        "close": (),
    }.items():
        params = inspect.signature(getattr(trainer_ds.Trainer, method)).parameters
        assert all(n in params for n in names), (method, list(params))
