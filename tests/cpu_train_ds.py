"""FunASR's `funasr-train-ds` on the CPU, for the tests (never shipped in the image).

FunASR 1.4.16's trainer assumes CUDA: train_ds.main calls torch.cuda.set_device(LOCAL_RANK) under
DDP, Trainer.warp_model moves the model with .cuda(local_rank) and wraps it in DDP with
device_ids=[local_rank], main sets trainer.device = int(LOCAL_RANK) (a CUDA device index), and
Trainer.log reads torch.cuda.memory_*. This shim turns exactly those into their CPU equivalents and
then runs the real entry point (funasr.bin.train_ds:main_hydra) with the same arguments. Use it
with `++backend=gloo` when there is more than one rank (NCCL needs GPUs). On a GPU none of this is
needed: the launcher runs the real `funasr-train-ds`.
"""

from __future__ import annotations

import sys

import torch
import torch.nn as nn


def _patch() -> None:
    torch.cuda.set_device = lambda *_a, **_k: None
    torch.cuda.empty_cache = lambda *_a, **_k: None
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(torch.cuda, name, lambda *_a, **_k: 0)
    nn.Module.cuda = lambda self, *_a, **_k: self

    from funasr.train_utils import trainer_ds

    ddp = trainer_ds.DDP

    def cpu_ddp(module, device_ids=None, **kwargs):
        return ddp(module, **kwargs)

    trainer_ds.DDP = cpu_ddp
    trainer_ds.Trainer.device = property(lambda self: "cpu", lambda self, value: None)


if __name__ == "__main__":
    _patch()
    from funasr.bin.train_ds import main_hydra

    sys.exit(main_hydra())
