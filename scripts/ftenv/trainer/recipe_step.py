"""The recipe's training step as FunASR's trainer runs it (funasr/bin/train_ds.py's torch settings,
AdamW over the trainable parameters, the gradient clipping), for the code that trains a model of
its own outside that trainer to time or count the step: the benchmarks, the self-check's loop.
"""

from __future__ import annotations

#: The recipe's learning rate and gradient clipping (FunASR's `optim_conf.lr`, `train_conf.grad_clip`).
LEARNING_RATE = 2e-4
CLIP_NORM = 10.0


def set_backends() -> None:
    """The torch settings funasr/bin/train_ds.py makes before training."""
    import torch

    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = True


def fresh(batch: dict, device: str):
    """A copy of the batch's tensors on the device: the model edits its inputs in place (negative
    ids, pads)."""
    import torch
    from funasr.train_utils.device_funcs import to_device

    return to_device({k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()}, device)


def optimizer(model, fused: bool = False):
    """The recipe's AdamW over the trainable parameters: foreach (torch's default on a GPU, asked
    for on a CPU too, so that a CPU count is a GPU's) or fused."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=LEARNING_RATE, **({"fused": True} if fused else {"foreach": True}))


def update(model, optim) -> None:
    """The recipe's update after a backward: clip the gradients, step, drop the gradients."""
    import torch

    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=CLIP_NORM)
    optim.step()
    optim.zero_grad(set_to_none=True)
