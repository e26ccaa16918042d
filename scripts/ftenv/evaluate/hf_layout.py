"""Fun-ASR-Nano in transformers' own layout (`FunAsrNanoForConditionalGeneration`, native in the
transformers this image pins; published as FunAudioLLM/Fun-ASR-Nano-2512-hf): the config built from
FunASR's config.yaml, FunASR's tensor names mapped onto the transformers model's, the checkpoint's
chat template. `ftenv export --format hf` writes it; `ftenv eval`/`transcribe` read it.

The names are transformers' (its modeling_fun_asr_nano.py in the pinned version; its conversion
script convert_fun_asr_nano_to_hf.py in the transformers repository splits the encoder's fused
`linear_q_k_v` in three along dim 0, q then k then v, and skips the CTC branch). Every FunASR
tensor is mapped or is one of the CTC branch's; anything else stops the export, because a tensor
dropped without a word is a model that decodes differently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ftenv.model.folder import CTC_PREFIXES, ModelLoadError

#: The audio placeholder the checkpoint's chat template and FunAsrNanoProcessor use (Qwen3's token).
AUDIO_TOKEN = "<|object_ref_start|>"

#: The chat template of the published -hf checkpoint (its convert_fun_asr_nano_to_hf.py stores it):
#: FunASR's prompt (funasr FunASRNano.get_prompt/data_load_speech) in ChatML, the audio as one
#: placeholder that the processor expands to one token per LFR frame.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% set audio = message['content'] | selectattr('type', 'equalto', 'audio') | list %}"
    "{% if message['role'] == 'user' and audio %}"
    "{% set texts = message['content'] | selectattr('type', 'equalto', 'text') | list %}"
    "{% set keywords = message['content'] | selectattr('type', 'equalto', 'keywords') | list %}"
    "{% set languages = message['content'] | selectattr('type', 'equalto', 'language') | list %}"
    "{% if texts or keywords %}"
    "请结合上下文信息，更加准确地完成语音转写任务。如果没有相关信息，我们会留空。\n\n\n**上下文信息：**\n\n\n"
    "{% for item in texts %}{{ item['text'] }}\n{% endfor %}"
    "{% set words = namespace(items=[]) %}"
    "{% for item in keywords %}{% set words.items = words.items + item['keywords'] %}{% endfor %}"
    "{% if words.items %}热词列表：[{{ words.items | join(', ') }}]\n{% endif %}"
    "{% endif %}"
    "语音转写{% if languages %}成{{ languages[0]['language'] }}{% endif %}："
    "{% for item in audio %}<|object_ref_start|>{% endfor %}"
    "{% else %}"
    "{% for item in message['content'] %}"
    "{% if item['type'] == 'audio' %}<|object_ref_start|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Inside an encoder or adaptor block: FunASR's name -> transformers' (FunAsrNanoEncoderLayer).
_IN_BLOCK = {
    "norm1.": "input_layernorm.",
    "norm2.": "post_attention_layernorm.",
    "self_attn.linear_q.": "self_attn.q_proj.",
    "self_attn.linear_k.": "self_attn.k_proj.",
    "self_attn.linear_v.": "self_attn.v_proj.",
    "self_attn.linear_out.": "self_attn.o_proj.",
    "self_attn.fsmn_block.": "self_attn.fsmn.conv.",
    "feed_forward.w_1.": "mlp.fc1.",
    "feed_forward.w_2.": "mlp.fc2.",
}
#: The SAN-M encoder's fused projection, split q, k, v along dim 0.
FUSED_QKV = "self_attn.linear_q_k_v."
QKV_ORDER = ("q", "k", "v")


@dataclass(frozen=True)
class Layout:
    """Where FunASR's encoder blocks sit among transformers' one list of encoder layers: encoders0
    is layer 0, encoders the next num_blocks - 1, tp_encoders the last tp_blocks; after_norm and
    tp_norm are the final_layernorm of the last transcription and the last timestamp layer."""

    num_blocks: int
    tp_blocks: int

    def encoder_layer(self, part: str, index: int) -> int:
        return {"encoders0": index, "encoders": 1 + index, "tp_encoders": self.num_blocks + index}[part]

    def norm_layer(self, part: str) -> int:
        return self.num_blocks - 1 if part == "after_norm" else self.num_blocks + self.tp_blocks - 1


_ENCODER = re.compile(r"^audio_encoder\.(encoders0|encoders|tp_encoders)\.(\d+)\.(.+)$")
_ENCODER_NORM = re.compile(r"^audio_encoder\.(after_norm|tp_norm)\.(weight|bias)$")
_ADAPTOR_BLOCK = re.compile(r"^audio_adaptor\.blocks\.(\d+)\.(.+)$")
_PROJECTOR = {"audio_adaptor.linear1.": "model.multi_modal_projector.linear_1.",
              "audio_adaptor.linear2.": "model.multi_modal_projector.linear_2."}  # fmt: skip
_LLM = {"llm.model.": "model.language_model.", "llm.lm_head.": "lm_head."}


def _in_block(rest: str) -> str | None:
    for funasr, hf in _IN_BLOCK.items():
        if rest.startswith(funasr):
            return hf + rest[len(funasr) :]
    return None


def map_name(key: str, layout: Layout) -> list[str] | None:
    """transformers' name(s) of one FunASR tensor (three for a fused QKV), None when unmapped."""
    if m := _ENCODER.match(key):
        prefix = f"model.audio_tower.layers.{layout.encoder_layer(m.group(1), int(m.group(2)))}."
        rest = m.group(3)
        if rest.startswith(FUSED_QKV):
            tail = rest[len(FUSED_QKV) :]
            return [f"{prefix}self_attn.{p}_proj.{tail}" for p in QKV_ORDER]
        inner = _in_block(rest)
        return [prefix + inner] if inner else None
    if m := _ENCODER_NORM.match(key):
        return [f"model.audio_tower.layers.{layout.norm_layer(m.group(1))}.final_layernorm.{m.group(2)}"]
    if m := _ADAPTOR_BLOCK.match(key):
        inner = _in_block(m.group(2))
        return [f"model.multi_modal_projector.layers.{m.group(1)}.{inner}"] if inner else None
    for table in (_PROJECTOR, _LLM):
        for funasr, hf in table.items():
            if key.startswith(funasr):
                return [hf + key[len(funasr) :]]
    return None


def map_weights(weights: dict, layout: Layout) -> tuple[dict, list[str]]:
    """(transformers' state dict, the FunASR tensors not used); ModelLoadError naming every FunASR
    tensor that is neither mapped nor the CTC branch's."""
    mapped, unused, unknown = {}, [], []
    for key, value in weights.items():
        names = map_name(key, layout)
        if names is None:
            # The CTC branch (timestamps) has no place in transformers' model; its conversion skips it too.
            (unused if key.startswith(CTC_PREFIXES) else unknown).append(key)
            continue
        parts = value.chunk(len(names), dim=0) if len(names) > 1 else (value,)
        if len(names) > 1 and value.shape[0] % len(names):
            raise ModelLoadError(f"{key}: {tuple(value.shape)} does not split in {len(names)} along dim 0")
        for name, part in zip(names, parts, strict=True):
            mapped[name] = part.contiguous()
    if unknown:
        raise ModelLoadError(
            f"{len(unknown)} tensor(s) of the checkpoint have no place in transformers' Fun-ASR-Nano "
            f"(e.g. {', '.join(unknown[:3])}); a LoRA checkpoint must be folded into its base weights "
            "first; export it with --format funasr, which keeps every tensor"
        )
    return mapped, unused


#: FunASR's front-end settings transformers' layout carries, with Fun-ASR-Nano's released values for
#: any config.yaml leaves out (one reading for the model's config and the feature extractor's).
FRONTEND_DEFAULTS = {"n_mels": 80, "fs": 16000, "frame_length": 25, "frame_shift": 10, "lfr_m": 7, "lfr_n": 6}


def frontend(conf: dict) -> dict[str, int]:
    """config.yaml's frontend_conf as numbers, FRONTEND_DEFAULTS filling what it leaves out."""
    fe = conf.get("frontend_conf") or {}
    return {key: int(fe.get(key, default)) for key, default in FRONTEND_DEFAULTS.items()}


def _check_supported(conf: dict) -> None:
    """Settings of config.yaml that transformers' model cannot express: refused, never approximated."""
    enc = conf.get("audio_encoder_conf") or {}
    ada = conf.get("audio_adaptor_conf") or {}
    fe = conf.get("frontend_conf") or {}
    llm = conf.get("llm_conf") or {}
    problems = []
    if conf.get("audio_encoder") not in (None, "SenseVoiceEncoderSmall"):
        problems.append(
            f"audio_encoder {conf.get('audio_encoder')} (transformers has SenseVoiceEncoderSmall's)"
        )
    if conf.get("audio_adaptor") not in (None, "Transformer"):
        problems.append(
            f"audio_adaptor {conf.get('audio_adaptor')} (transformers has the Transformer adaptor)"
        )
    if int(ada.get("downsample_rate", 2)) != 1:
        problems.append(
            f"audio_adaptor_conf.downsample_rate {ada.get('downsample_rate', 2)} (transformers: 1)"
        )
    if ada.get("use_low_frame_rate"):
        problems.append("audio_adaptor_conf.use_low_frame_rate (transformers: one audio token per frame)")
    if int(enc.get("sanm_shfit", 0) or 0):
        problems.append(f"audio_encoder_conf.sanm_shfit {enc['sanm_shfit']} (transformers: 0)")
    if int(enc.get("tp_blocks", 0) or 0) < 1:
        problems.append("audio_encoder_conf.tp_blocks 0 (transformers' encoder has timestamp layers)")
    if str(fe.get("window", "hamming")) != "hamming":  # transformers' extractor does not save its window
        problems.append(f"frontend_conf.window {fe['window']} (transformers saves no window: hamming)")
    if fe.get("cmvn_file"):
        problems.append("frontend_conf.cmvn_file (FunAsrNanoFeatureExtractor applies no CMVN)")
    if llm.get("use_lora"):
        problems.append("llm_conf.use_lora (fold the LoRA weights into the base weights first)")
    if problems:
        raise ModelLoadError(
            f"not expressible in transformers' Fun-ASR-Nano layout: {'; '.join(problems)}; "
            "export with --format funasr (FunASR's own layout) instead"
        )


def hf_config(conf: dict, llm_dir: Path, audio_token_id: int, dtype: str):
    """FunAsrNanoConfig from FunASR's config.yaml and the decoder's config.json; the layer norms'
    eps are FunASR's own (its encoder: torch's 1e-5; its adaptor's LayerNorm: 1e-12)."""
    from transformers import FunAsrNanoConfig, FunAsrNanoEncoderConfig, Qwen3Config
    from transformers.models.fun_asr_nano.configuration_fun_asr_nano import FunAsrNanoAdaptorConfig

    _check_supported(conf)
    enc = conf.get("audio_encoder_conf") or {}
    ada = conf.get("audio_adaptor_conf") or {}
    fe = frontend(conf)
    text = Qwen3Config.from_pretrained(str(llm_dir))
    blocks, tp = int(enc.get("num_blocks", 50)), int(enc.get("tp_blocks", 20))
    audio = FunAsrNanoEncoderConfig(
        num_mel_bins=fe["n_mels"],
        num_stacked_frames=fe["lfr_m"],
        hidden_size=int(enc.get("output_size", 512)),
        num_attention_heads=int(enc.get("attention_heads", 4)),
        intermediate_size=int(enc.get("linear_units", 2048)),
        num_hidden_layers=blocks + tp,
        num_timestamp_prediction_layers=tp,
        hidden_dropout=float(enc.get("dropout_rate", 0.1)),
        attention_dropout=float(enc.get("attention_dropout_rate", 0.1)),
        fsmn_kernel_size=int(enc.get("kernel_size", 11)),
        layer_norm_eps=1e-5,
    )
    adaptor = FunAsrNanoAdaptorConfig(
        hidden_size=text.hidden_size,
        num_attention_heads=int(ada.get("attention_heads", 8)),
        intermediate_size=text.hidden_size // 4,
        num_hidden_layers=int(ada.get("n_layer", 2)),
        hidden_dropout=float(ada.get("dropout_rate", 0.0)),
        attention_dropout=float(ada.get("attention_dropout_rate", 0.0)),
        projector_hidden_size=int(ada.get("ffn_dim", 2048)),
        layer_norm_eps=1e-12,
    )
    config = FunAsrNanoConfig(
        audio_config=audio,
        text_config=text,
        adaptor_config=adaptor,
        audio_token_id=audio_token_id,
        tie_word_embeddings=bool(getattr(text, "tie_word_embeddings", True)),
    )
    config.dtype = dtype
    return config, Layout(blocks, tp)
