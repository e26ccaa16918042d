"""`ftenv export --format hf`: the folder in transformers' Fun-ASR-Nano layout written from a
checkpoint that ftenv.evaluate.export has checked (its choice of checkpoint and base folder, its fit
check, its temporary folder renamed into place): model.safetensors, config.json, generation_config.json,
the processor (feature extractor settings, the chat template) and the tokenizer; names and config
from ftenv.evaluate.hf_layout."""

from __future__ import annotations

from pathlib import Path

from ftenv.evaluate import hf_layout
from ftenv.model.folder import ModelLoadError

WEIGHTS = "model.safetensors"


def _tokenizer(tok_dir: Path, vocab_size: int):
    """The decoder's tokenizer, padding on the left (for batched generate), with the audio
    placeholder token: Qwen3's has it; one without it (a tiny test tokenizer) gets it added as a
    special token, below the vocabulary size (its embedding is never read: audio replaces it)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir), padding_side="left")
    if hf_layout.AUDIO_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_tokens([hf_layout.AUDIO_TOKEN], special_tokens=True)
    token_id = tokenizer.convert_tokens_to_ids(hf_layout.AUDIO_TOKEN)
    if token_id >= vocab_size:
        raise ModelLoadError(
            f"{tok_dir}: the tokenizer has no {hf_layout.AUDIO_TOKEN} below the decoder's vocabulary size "
            f"{vocab_size}; transformers' Fun-ASR-Nano needs it as the audio placeholder"
        )
    return tokenizer, token_id


def _dtype_name(weights: dict) -> str:
    """config.json's dtype: float32 where any weight is (FunASR keeps its encoder and adaptor in fp32
    and decodes in fp32 on a CPU); else the weights' own."""
    import torch

    kinds = {v.dtype for v in weights.values() if v.is_floating_point()}
    if torch.float32 in kinds or not kinds:
        return "float32"
    return str(next(iter(kinds))).removeprefix("torch.")


def write(folder: Path, weights: dict, conf: dict, llm_dir: Path, tok_dir: Path) -> tuple[int, list[str]]:
    """Write the HF layout into folder (which exists and is empty): model.safetensors, config.json,
    generation_config.json, the processor (preprocessor config, chat template) and the tokenizer.
    Returns (tensors written, the FunASR tensors not used)."""
    import torch
    from transformers import (
        FunAsrNanoFeatureExtractor,
        FunAsrNanoForConditionalGeneration,
        FunAsrNanoProcessor,
        GenerationConfig,
        Qwen3Config,
    )

    vocab = Qwen3Config.from_pretrained(str(llm_dir)).vocab_size
    tokenizer, audio_id = _tokenizer(tok_dir, vocab)
    config, layout = hf_layout.hf_config(conf, llm_dir, audio_id, _dtype_name(weights))
    mapped, unused = hf_layout.map_weights(weights, layout)
    with torch.device("meta"):
        model = FunAsrNanoForConditionalGeneration(config)
    own = model.state_dict()
    embed = mapped.get("model.language_model.embed_tokens.weight")
    if config.tie_word_embeddings and "lm_head.weight" not in mapped:
        mapped["lm_head.weight"] = embed
    elif (
        config.tie_word_embeddings and embed is not None and not torch.equal(mapped["lm_head.weight"], embed)
    ):
        raise ModelLoadError(
            "the decoder's config.json ties lm_head to the embeddings but the checkpoint's differ; "
            "transformers' model would keep the embeddings only: export with --format funasr"
        )
    missing = sorted(k for k in own if k not in mapped)
    extra = sorted(k for k in mapped if k not in own)
    wrong = sorted(k for k in own if k in mapped and tuple(own[k].shape) != tuple(mapped[k].shape))
    if missing or extra or wrong:
        said = [
            f"{len(missing)} of its tensors not written (e.g. {', '.join(missing[:3])})" if missing else "",
            f"{len(extra)} mapped names it does not have (e.g. {', '.join(extra[:3])})" if extra else "",
            f"{len(wrong)} of another shape (e.g. {wrong[0]}: {tuple(mapped[wrong[0]].shape)} mapped, "
            f"{tuple(own[wrong[0]].shape)} in transformers' model)"
            if wrong
            else "",
        ]
        raise ModelLoadError(
            "the checkpoint does not fill transformers' Fun-ASR-Nano built from its config.yaml: "
            + "; ".join(s for s in said if s)
        )
    model.load_state_dict(mapped, strict=True, assign=True)
    if config.tie_word_embeddings:
        model.tie_weights()
    model.save_pretrained(str(folder))
    generation = _generation_config(config.text_config, tokenizer, GenerationConfig)
    generation.save_pretrained(str(folder))
    fe = hf_layout.frontend(conf)
    extractor = FunAsrNanoFeatureExtractor(
        feature_size=fe["n_mels"],
        sampling_rate=fe["fs"],
        frame_length=fe["frame_length"],
        frame_shift=fe["frame_shift"],
        num_frames_lfr=fe["lfr_m"],
        stride_lfr=fe["lfr_n"],
        return_attention_mask=True,
    )
    processor = FunAsrNanoProcessor(
        feature_extractor=extractor, tokenizer=tokenizer, chat_template=hf_layout.CHAT_TEMPLATE
    )
    processor.save_pretrained(str(folder))
    return len(own), unused


def _generation_config(text_config, tokenizer, generation_config_class):
    """Greedy, ending where FunASR's decoder ends: FunASR builds its decoder with from_config, so its
    generate uses the defaults of the decoder's config.json (greedy, its eos), never the sampling
    settings of a generation_config.json beside it (Qwen3-0.6B's samples); the tokenizer's eos where
    config.json names none, its pad token so that batched generate pads."""
    generation = generation_config_class.from_model_config(text_config)
    if generation.eos_token_id is None:
        generation.eos_token_id = tokenizer.eos_token_id
    if generation.pad_token_id is None:
        generation.pad_token_id = tokenizer.pad_token_id
    return generation
