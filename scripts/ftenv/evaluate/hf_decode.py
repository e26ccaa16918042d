"""Transcripts of a folder in transformers' Fun-ASR-Nano layout (`ftenv export --format hf`),
through transformers' own path: `FunAsrNanoProcessor.apply_transcription_request` (the checkpoint's
chat template, its feature extractor) and one batched `generate`, greedy, as ftenv.evaluate.decode
decodes FunASR folders, so that both land in the same table.

Audio is read as FunASR reads it (funasr.utils.load_utils, resampled to the extractor's rate) and
given to the processor at unit scale, as transformers' own audio loading gives it. FunASR's
WavFrontend scales the samples by 2**15 first; that adds the same constant to every log-mel value
of a frame, which the encoder's first layer norm removes (its input is features * sqrt(d) plus the
position encoding, normalised over the feature dimension), so the hypotheses agree up to rounding.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.evaluate import decode
from ftenv.model.folder import ModelLoadError


@dataclass
class Loaded:
    """An HF folder's model and processor, on the device it decodes on."""

    model: object
    processor: object
    device: str
    notes: list[str] = field(default_factory=list)


def load(model_dir: str | os.PathLike, device: str | None = None) -> Loaded:
    """The folder's model, every tensor from its files: transformers only warns about a tensor the
    files lack and leaves it random, which would be scored without a word; here that is refused."""
    import torch
    from transformers import AutoProcessor, FunAsrNanoForConditionalGeneration

    from ftenv.model.funasr_import import OFFLINE_ENV

    variables.export(OFFLINE_ENV, keep_set=True)
    model_dir = Path(model_dir)
    device = decode.pick_device(device)
    try:
        processor = AutoProcessor.from_pretrained(str(model_dir))
        model, info = FunAsrNanoForConditionalGeneration.from_pretrained(
            str(model_dir), output_loading_info=True, dtype=torch.float32
        )
    except (OSError, ValueError, KeyError) as exc:
        first = (str(exc).splitlines() or [""])[0][:300]
        raise ModelLoadError(
            f"{model_dir}: does not load as transformers' Fun-ASR-Nano ({type(exc).__name__}: {first}); "
            "write it again with `ftenv export --format hf`"
        ) from None
    wrong = {
        k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")
    }
    if wrong:
        said = "; ".join(
            f"{k.replace('_', ' ')}: {', '.join(map(str, sorted(v)[:3]))}" for k, v in wrong.items()
        )
        raise ModelLoadError(
            f"{model_dir}: its weights do not fill the model its config.json builds ({said}); "
            "write it again with `ftenv export --format hf`"
        )
    if decode.decoder_dtype(device) == "bf16":
        # Loaded in fp32 whatever config.json says; then the decoder's dtype as ftenv.evaluate.decode's.
        model.model.language_model.to(torch.bfloat16)
        model.lm_head.to(torch.bfloat16)
    model.to(device).eval()
    return Loaded(model, processor, device)


def _audio(loaded: Loaded, path: str):
    from funasr.utils.load_utils import load_audio_text_image_video

    rate = loaded.processor.feature_extractor.sampling_rate
    return load_audio_text_image_video(path, fs=rate).numpy()


def decode_batch(loaded: Loaded, batch: Sequence[decode.Utterance], max_new_tokens: int):
    """(token ids, texts) of one batch: one processor call, one generate."""
    waves = [_audio(loaded, u.audio) for u in batch]
    inputs = loaded.processor.apply_transcription_request(audio=waves, processor_kwargs={"padding": True}).to(
        loaded.device
    )
    tokenizer = loaded.processor.tokenizer
    out = loaded.model.generate(
        **inputs,
        max_new_tokens=max_new_tokens,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        **decode.GREEDY,
    )
    return decode.finished(out[:, inputs["input_ids"].shape[1] :], loaded.model.generation_config, tokenizer)


def decode_batched(
    loaded: Loaded,
    utterances: Sequence[decode.Utterance],
    batch_size: int = decode.BATCH_SIZE,
    max_new_tokens: int = decode.MAX_NEW_TOKENS,
    progress: Callable[[int], None] | None = None,
) -> decode.Decoded:
    """Every utterance in batches of up to batch_size, longest first, as decode.decode_batched."""
    return decode.in_batches(decode_batch, loaded, utterances, batch_size, max_new_tokens, progress)


def decode_one_by_one(loaded: Loaded, utterances, max_new_tokens=decode.MAX_NEW_TOKENS, progress=None):
    """One utterance a batch (`--one-by-one`): no padding anywhere."""
    return decode_batched(loaded, utterances, 1, max_new_tokens, progress)
