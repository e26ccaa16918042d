"""FunASRNano's training forward without host syncs (`--compile-parts ...,nosync`): the same loss,
accuracy and logged numbers, because each `.item()` of FunASR's forward makes the CPU wait for the
GPU between the forward and the backward and sets the pace of a launch-bound step (docs/compile.md).
"""

from __future__ import annotations

import types

import torch

from ftenv import upstream
from ftenv.trainer.fastpath import labelled_head

#: Marks the installed forward (install is idempotent, remove finds it).
MARK = "ftenv_sync_free"
#: Set on a model instance whose forward runs the LM head over labelled positions only.
HEAD_MARK = "ftenv_labelled_head"
#: Where a model instance keeps its whole audio side region (compiled_audio.install_whole).
AUDIO_SIDE = "ftenv_audio_side"
#: Where a model instance keeps its encoder output cache (ftenv.trainer.fastpath.audio_cache).
AUDIO_CACHE = "ftenv_audio_cache"
#: The batch key its collator adds: one speech fingerprint per row.
SPEECH_KEYS = "ftenv_speech_keys"


def packaged_forward():
    """funasr's FunASRNano.forward, the one this replaces (None when funasr has no such model)."""
    try:
        from funasr.models.fun_asr_nano.model import FunASRNano
    except Exception:
        return None
    return FunASRNano.forward


def splice(inputs_embeds, encoder_out, encoder_out_lens, fbank_beg, fake_token_len):
    """FunASRNano's splice of the audio turns into the text embeddings, on the device, no sync.

    Turn (b, t) with fbank_beg > 0 takes encoder row k (the turns with audio, counted row-major),
    its first fake_token_len[b, t] frames going to positions fbank_beg[b, t] onwards; a later turn
    overwrites an earlier one where they overlap, as FunASR's loop does."""
    tokens = inputs_embeds.shape[1]
    rows, frames = encoder_out.shape[:2]
    has = fbank_beg > 0
    row = (has.flatten().cumsum(0) - 1).view_as(fbank_beg).clamp(0, max(rows - 1, 0))
    lens = encoder_out_lens.to(fake_token_len.device)[row]
    fits = (fake_token_len <= frames) & (fbank_beg + fake_token_len <= tokens)
    length = torch.where(fits, fake_token_len, lens)
    pos = torch.arange(tokens, device=inputs_embeds.device)
    for turn in range(fbank_beg.shape[1]):
        rel = pos[None, :] - fbank_beg[:, turn, None]  # (batch, tokens)
        inside = has[:, turn, None] & (rel >= 0) & (rel < length[:, turn, None]) & (rel < frames)
        src = encoder_out[row[:, turn, None], rel.clamp(0, frames - 1)]  # (batch, tokens, dim)
        inputs_embeds = torch.where(inside[..., None], src.to(inputs_embeds.dtype), inputs_embeds)
    return inputs_embeds


def accuracy(logits, labels, ignore_label: int = -100):
    """funasr.metrics.compute_acc.compute_accuracy of the next-token predictions, without
    masked_select: the same counts, as tensors."""
    preds = torch.argmax(logits, -1)[:, :-1]
    targets = labels[:, 1:]
    mask = targets != ignore_label
    return ((preds == targets) & mask).sum().float() / mask.sum().float()


def forward(
    self,
    speech=None,
    speech_lengths=None,
    input_ids=None,
    attention_mask=None,
    labels_ids=None,
    fbank_beg=None,
    fbank_mask=None,
    **kwargs,
):
    """FunASRNano.forward (the pinned funasr) for training and validation, without host syncs."""
    from funasr.models.fun_asr_nano.device_utils import resolve_autocast_device_type
    from funasr.models.fun_asr_nano.model import dtype_map
    from funasr.train_utils.device_funcs import force_gatherable

    batch_size, token_num = input_ids.shape
    stats = {}
    input_ids = input_ids.clamp(min=0)
    inputs_embeds = self.llm.model.get_input_embeddings()(input_ids)
    fbank_beg = fbank_beg.clamp(min=0)
    if speech is not None:
        if len(speech_lengths.size()) > 1:
            speech_lengths = speech_lengths[:, 0]
        batch_size_speech, frames, _ = speech.shape
        whole = self.__dict__.get(AUDIO_SIDE)
        if whole is not None:  # `audiowhole`: encoder and adaptor, one compiled region
            encoder_out, encoder_out_lens = whole(speech, speech_lengths)
        else:
            cache = self.__dict__.get(AUDIO_CACHE)
            if cache is not None:  # `audiocache`: the frozen encoder's outputs across epochs
                keys = kwargs.get(SPEECH_KEYS)
                encoder_out, encoder_out_lens = cache.encode(self, speech, speech_lengths, keys)
            elif self.audio_encoder_activation_checkpoint:
                from torch.utils.checkpoint import checkpoint

                encoder_out, encoder_out_lens = checkpoint(
                    self.encode, speech, speech_lengths, use_reentrant=False
                )
            else:
                encoder_out, encoder_out_lens = self.encode(speech, speech_lengths)
            encoder_out, encoder_out_lens = self.audio_adaptor(encoder_out, encoder_out_lens)
        fake_token_len = kwargs.get("fake_token_len").clamp(min=0)
        inputs_embeds = splice(inputs_embeds, encoder_out, encoder_out_lens, fbank_beg, fake_token_len)
        stats["batch_size_speech"] = batch_size_speech
        stats["batch_size_x_frames"] = frames * batch_size_speech
        stats["batch_size_real_frames"] = speech_lengths.sum()
        stats["padding_frames"] = stats["batch_size_x_frames"] - stats["batch_size_real_frames"]

    device_type = resolve_autocast_device_type(next(self.parameters()).device)
    with torch.autocast(
        device_type=device_type, enabled=self.llm_dtype != "fp32", dtype=dtype_map[self.llm_dtype]
    ):
        labels_ids = torch.where(labels_ids == -1, -100, labels_ids)
        attention_mask = attention_mask.clamp(min=0)
        embeds = inputs_embeds.to(dtype_map[self.llm_dtype])
        if self.__dict__.get(HEAD_MARK):
            index = kwargs.get(labelled_head.LABEL_INDEX)
            loss, acc = labelled_head.loss_and_accuracy(self.llm, embeds, attention_mask, labels_ids, index)
        else:
            model_outputs = self.llm(inputs_embeds=embeds, attention_mask=attention_mask, labels=labels_ids)
            loss = model_outputs.loss
            with torch.no_grad():
                acc = accuracy(model_outputs.logits, labels_ids)
    stats["acc"] = acc
    stats["loss"] = torch.clone(loss.detach())
    stats["batch_size"] = batch_size
    stats["batch_size_x_tokens"] = token_num * batch_size
    stats["batch_size_real_tokens"] = attention_mask.sum()
    stats["padding_tokens"] = stats["batch_size_x_tokens"] - stats["batch_size_real_tokens"]
    dialog_turns = (fbank_beg > 0).sum(-1)
    stats["dialog_turns_max"] = dialog_turns.max().long()
    # FunASR divides Python ints (float64) and force_gatherable stores float32: the same rounding.
    stats["dialog_turns_avg"] = (dialog_turns.sum().double() / batch_size).float()
    weight = (labels_ids > 1).sum() if self.length_normalized_loss else batch_size
    return force_gatherable((loss, stats, weight), loss.device)


setattr(forward, MARK, True)


def install(model, labelled: bool = False) -> str | None:
    """Give this model instance the sync-free forward, with the LM head over labelled positions
    only when `labelled` (ftenv.trainer.fastpath.labelled_head); returns why not (None: installed)."""
    original = packaged_forward()
    if labelled:
        model.__dict__[HEAD_MARK] = True
    if getattr(model.__dict__.get("forward"), MARK, False):
        return None
    if original is None or getattr(type(model), "forward", None) is not original:
        model.__dict__.pop(HEAD_MARK, None)
        return (
            f"nosync/lmhead: {type(model).__name__}.forward is not funasr's packaged FunASRNano.forward "
            "(a remote-code model?): its forward left as is"
        )
    if refused := upstream.refusal(upstream.SYNC_FREE):
        model.__dict__.pop(HEAD_MARK, None)
        return refused
    model.forward = types.MethodType(forward, model)
    return None


def remove(model) -> None:
    model.__dict__.pop(HEAD_MARK, None)
    if getattr(model.__dict__.get("forward"), MARK, False):
        del model.forward
