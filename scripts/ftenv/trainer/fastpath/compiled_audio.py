"""The compiled audio side of Fun-ASR-Nano (`--compile-parts audio` per block, `audiowhole` as one
region), because the frozen encoder and the adaptor launch about 2,000 small kernels a step eager;
the adaptor gets a padding mask built on the device, without FunASR's host sync (docs/compile.md).
"""

from __future__ import annotations

import torch

from ftenv.trainer.fastpath.compiled_decoder import TRAIN_DEVICES, Switch, switch_on
from ftenv.trainer.fastpath.sync_free import AUDIO_SIDE


def encoder_blocks(model) -> list:
    """The repeated blocks of FunASRNano's SenseVoice encoder, in order."""
    encoder = getattr(model, "audio_encoder", None)
    names = ("encoders0", "encoders", "tp_encoders")
    if encoder is None or not all(hasattr(encoder, n) for n in names):
        raise TypeError(
            f"{type(model).__name__} has no SenseVoice `audio_encoder` (encoders0, encoders, tp_encoders): "
            "the compiled audio side is for Fun-ASR-Nano (FunASRNano); drop `audio` from the compile parts"
        )
    return [block for name in names for block in getattr(encoder, name)]


def adaptor_of(model):
    adaptor = getattr(model, "audio_adaptor", None)
    if adaptor is None or not all(hasattr(adaptor, n) for n in ("k", "linear1", "linear2", "blocks")):
        raise TypeError(
            f"{type(model).__name__}.audio_adaptor is not FunASR's Transformer adaptor: the compiled audio "
            "side is for Fun-ASR-Nano; drop `audio` from the compile parts"
        )
    return adaptor


def adaptor_forward(adaptor):
    """FunASR's Transformer adaptor forward (funasr/models/llm_asr/adaptor.py) with a device-side
    padding mask: no `lengths.tolist()`, no host-built mask. Same outputs for the same inputs."""

    def forward(x, ilens=None):
        batch, frames, dim = x.shape
        chunks = (frames - 1) // adaptor.k + 1
        x = torch.nn.functional.pad(x, (0, 0, 0, chunks * adaptor.k - frames, 0, 0), value=0.0)
        x = x.contiguous().view(batch, chunks, dim * adaptor.k)
        x = adaptor.linear2(adaptor.relu(adaptor.linear1(x)))
        olens = (ilens - 1) // adaptor.k + 1
        masks = (torch.arange(chunks, device=x.device)[None, :] < olens[:, None].to(x.device))[:, None, :]
        if adaptor.blocks is not None:
            for block in adaptor.blocks:
                x, masks = block(x, masks)
        return x, olens

    forward.ftenv_adaptor_forward = True
    return forward


def install_adaptor_forward(model) -> None:
    """Give this model's adaptor the device-side mask forward, eager (bucketing needs it: FunASR's
    mask would be shorter than a batch padded beyond its longest utterance)."""
    adaptor = adaptor_of(model)
    current = adaptor.__dict__.get("forward")
    if current is None or not (
        getattr(current, "ftenv_adaptor_forward", False) or isinstance(current, Switch)
    ):
        adaptor.forward = adaptor_forward(adaptor)


def install(model, devices=TRAIN_DEVICES, dynamic: bool | None = True, backend: str = "inductor", **graphs):
    """Switches on every encoder block and on the adaptor (this instance only); returns them.
    `graphs` go to each Switch (CUDA graphs over the buckets, see Switch)."""
    switch = {"devices": devices, "dynamic": dynamic, "backend": backend, **graphs}
    switches = [switch_on(block, block.forward, **switch) for block in encoder_blocks(model)]
    adaptor = adaptor_of(model)
    return [*switches, switch_on(adaptor, adaptor_forward(adaptor), **switch)]


def audio_side(model):
    """The audio side as one function: FunASRNano's `encode` (the SenseVoice encoder's forward, on
    a copy of the speech) then the adaptor with the device-side mask; (adaptor out, its lengths)."""
    encoder_blocks(model)  # the same checks and messages as the per-block part
    encoder, forward = model.audio_encoder, adaptor_forward(adaptor_of(model))

    def run(speech, speech_lengths):
        encoder_out, encoder_out_lens = encoder(speech.clone(), speech_lengths)
        return forward(encoder_out, encoder_out_lens)

    return run


def install_whole(
    model, devices=TRAIN_DEVICES, dynamic: bool | None = True, backend: str = "inductor", **graphs
):
    """One Switch over the whole audio side (this instance only), for the sync-free forward;
    returns it. `graphs` go to the Switch (CUDA graphs over the buckets)."""
    current = model.__dict__.get(AUDIO_SIDE)
    if isinstance(current, Switch):
        return current
    switch = Switch(audio_side(model), devices=devices, dynamic=dynamic, backend=backend, **graphs)
    model.__dict__[AUDIO_SIDE] = switch
    return switch


def uninstall(model) -> None:
    model.__dict__.pop(AUDIO_SIDE, None)
    for module in (*encoder_blocks(model), adaptor_of(model)):
        if "forward" in module.__dict__:
            del module.forward
