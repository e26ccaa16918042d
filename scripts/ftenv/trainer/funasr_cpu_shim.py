"""CPU shim for FunASR's trainer, so that the real `funasr-train-ds` runs in tests without CUDA:
with `++device=cpu` the pinned trainer's CUDA-only calls get CPU equivalents. Never used on a
GPU.
"""

from __future__ import annotations

from ftenv import upstream

#: `python -m ftenv.trainer.funasr_entry` applies the shim when this is "1" (the self-check on a CPU).
#: The recipe's overrides for a run on the CPU: fp32 LLM (bf16 matmuls there build a oneDNN primitive
#: per new shape, a CPU-only per-shape cost) and no DataLoader workers.
CPU_OVERRIDES = ("++device=cpu", "++dataset_conf.num_workers=0", "++llm_conf.llm_dtype=fp32")
_MEMORY_CALLS = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")


def apply() -> list[str]:
    """Patch FunASR's Trainer for the CPU; returns what was patched (for the log)."""
    import torch
    from funasr.train_utils import trainer_ds

    patched = []
    if torch.cuda.is_available():
        return patched  # a GPU: the trainer runs as upstream wrote it
    if refused := upstream.refusal(upstream.CPU_SHIM):
        return [refused]

    def get_device(self):
        return self.__dict__.get("_ftenv_cpu_shim_device", "cpu")

    def set_device(self, value):
        # train_ds.main hands the trainer int(LOCAL_RANK): a GPU index. There is no GPU here.
        self.__dict__["_ftenv_cpu_shim_device"] = "cpu" if isinstance(value, int) else value

    trainer_ds.Trainer.device = property(get_device, set_device)
    patched.append("Trainer.device: a GPU index becomes 'cpu'")
    # Several ranks (DDP over gloo): no device to select, no .cuda(), no device_ids.
    torch.cuda.set_device = lambda *args, **kwargs: None
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self
    ddp = trainer_ds.DDP
    trainer_ds.DDP = lambda module, device_ids=None, **kwargs: ddp(module, **kwargs)
    patched.append("torch.cuda.set_device, Module.cuda, DDP(device_ids=...): CPU equivalents")
    for name in _MEMORY_CALLS:
        try:
            getattr(torch.cuda, name)()
        except Exception:
            setattr(torch.cuda, name, lambda *args, **kwargs: 0)
            patched.append(f"torch.cuda.{name}() -> 0")
    return patched
