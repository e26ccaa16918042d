"""CPU SHIM for FunASR's trainer: only for running `funasr-train-ds` on a machine without CUDA.

funasr/bin/train_ds.py sets `trainer.device = int(LOCAL_RANK)` after building the trainer, so
every batch goes to `cuda:0`. On a GPU nothing here is needed or used. On a CPU, with `++device=cpu`
among the overrides, `apply()` makes the trainer keep "cpu" when it is handed a GPU index, and, if
torch.cuda's memory counters raise on this build (the per-step log line calls them), makes them
return 0. Nothing else of FunASR is changed.
"""

from __future__ import annotations

_MEMORY_CALLS = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")


def apply() -> list[str]:
    """Patch FunASR's Trainer for the CPU; returns what was patched (for the log)."""
    import torch
    from funasr.train_utils import trainer_ds

    patched = []

    def get_device(self):
        return self.__dict__.get("_ftenv_cpu_shim_device", "cpu")

    def set_device(self, value):
        # train_ds.main hands the trainer int(LOCAL_RANK): a GPU index. There is no GPU here.
        self.__dict__["_ftenv_cpu_shim_device"] = "cpu" if isinstance(value, int) else value

    trainer_ds.Trainer.device = property(get_device, set_device)
    patched.append("Trainer.device: a GPU index becomes 'cpu'")
    for name in _MEMORY_CALLS:
        try:
            getattr(torch.cuda, name)()
        except Exception:
            setattr(torch.cuda, name, lambda *args, **kwargs: 0)
            patched.append(f"torch.cuda.{name}() -> 0")
    return patched
