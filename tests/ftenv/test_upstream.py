"""The upstream boundary (ftenv.upstream): every replacement of or hook into FunASR's or torch's own
code rests on the source it was written from, here as in the image; a changed upstream function
fails its contract, naming the function and the fix, and at run time that part is not installed
(one line), upstream's code running instead."""

from __future__ import annotations

import importlib

import pytest

from ftenv import upstream

TARGETS = sorted({(hook, target) for hook in upstream.HOOKS for target, _ in hook.sources}, key=str)


def changed_upstream(*args, **kwargs):
    """Stands for an upstream function whose source changed in a bump."""
    return None


@pytest.fixture
def fresh(monkeypatch):
    """No refusal remembered from earlier in this process."""
    monkeypatch.setattr(upstream, "_checked", {})


def plant(monkeypatch, target: str) -> None:
    """Replace the upstream function `target` names by one with another source (undone after)."""
    module, _, qualname = target.partition(":")
    owner, _, name = qualname.rpartition(".")
    parent = upstream.resolve(f"{module}:{owner}") if owner else importlib.import_module(module)
    monkeypatch.setattr(parent, name, changed_upstream)


@pytest.mark.parametrize("hook", upstream.HOOKS, ids=lambda h: h.home)
def test_each_hook_rests_on_the_source_it_was_written_from(hook, fresh):
    found = upstream.changed(hook)
    now = {t: upstream.source_sha256(t) for t, _ in hook.sources}
    assert found == [], f"{hook.part}: {found}: {upstream.fix(hook)}; the sources now: {now}"
    assert upstream.refusal(hook) is None


@pytest.mark.parametrize(("hook", "target"), TARGETS, ids=lambda x: getattr(x, "home", x))
def test_a_changed_upstream_function_breaks_its_contract(monkeypatch, fresh, hook, target):
    plant(monkeypatch, target)
    found = upstream.changed(hook)
    assert len(found) == 1 and found[0].startswith(f"{target} changed (source sha256 "), found
    line = upstream.refusal(hook)
    assert line.startswith(f"{hook.part} not installed, upstream's code runs: {target} changed")
    assert "\n" not in line and hook.home in upstream.fix(hook) and "ftenv/upstream.py" in upstream.fix(hook)


def test_a_missing_upstream_function_is_named(monkeypatch, fresh):
    hook = upstream.Hook("a part", "ftenv.x", (("funasr.no_such_module:F.forward", "0" * 64),))
    assert upstream.changed(hook) == ["funasr.no_such_module:F.forward is not there"]


def test_the_run_falls_back_to_upstreams_code(monkeypatch, fresh):
    """At run time each home leaves upstream's code in place and says why in one line."""
    import torch
    from funasr.register import tables
    from funasr.train_utils import trainer_ds
    from torch.distributed.elastic.multiprocessing import api

    from ftenv.data import runtime
    from ftenv.launch.runlife import torchrun
    from ftenv.trainer.fastpath import parts
    from ftenv.trainer.runlife import hooks

    plant(monkeypatch, "torch.distributed.elastic.multiprocessing.api:PContext.close")
    handler = api._terminate_process_handler
    assert "its own (30 s; torchrun's longer wait" in torchrun._longer_grace_after_a_signal()
    assert api._terminate_process_handler is handler

    monkeypatch.setattr(torch, "save", torch.save)  # what the run life installs regardless, undone after
    monkeypatch.setattr(torch.distributed, "init_process_group", torch.distributed.init_process_group)
    plant(monkeypatch, "funasr.train_utils.trainer_ds:Trainer.train_epoch")
    notes = hooks.install()
    assert notes[0].startswith(upstream.RUN_LIFE.part + " not installed")
    assert trainer_ds.Trainer.train_epoch is changed_upstream

    dataset = tables.dataset_classes["FunASR"]
    monkeypatch.setattr(dataset, "_ftenv_counted", False, raising=False)
    plant(monkeypatch, "funasr.register:tables.dataset_classes[FunASR].__getitem__")
    assert runtime.install().startswith(upstream.DATA_LOSS.part + " not installed")
    assert dataset.__getitem__ is changed_upstream

    plant(monkeypatch, "funasr.models.fun_asr_nano.model:FunASRNano.forward")
    assert parts.refused(("regional",)) == []  # the compiled layers rest on no copied source
    assert parts.refused(("regional", "nosync"))[0].startswith(upstream.SYNC_FREE.part + " not installed")
