"""A tiny, random Fun-ASR-Nano and a synthetic dataset, made offline (`ftenv tinymodel OUT_DIR`,
`build(out_dir)`), so that the self-check and the tests run the real FunASR training code without a
hub, weights or network; the same seed gives the same files."""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from ftenv import variables
from ftenv.data import chatml
from ftenv.data.sets import FILE_NAMES

# Their home is the model wing (the trainer's environment, the eval's import); callers here use
# tinymodel.quiet_funasr_import and tinymodel.OFFLINE_ENV (offline for everything FunASR,
# transformers and modelscope might fetch: the environment `ftenv finetune` gives the trainer).
from ftenv.model.folder import CONFIG, WEIGHTS
from ftenv.model.funasr_import import OFFLINE_ENV, quiet_funasr_import

SAMPLE_RATE = 16000
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
# fmt: off
_SYLLABLES = [
    "ba", "da", "ka", "la", "ma", "na", "pa", "sa", "ta", "wa", "ya", "zha", "chi", "shi", "ri",
    "zi", "ci", "si", "bo", "de", "ge", "he", "ji", "ke", "le", "mo", "ne", "po", "qi", "re", "se",
    "te", "xu", "yu", "zu", "an", "en", "in", "un", "ang", "eng", "ing", "ong",
]
# fmt: on

#: The LLM: Qwen3 with 2 layers. head_dim 128 is Qwen3-0.6B's (a multiple of 8, <= 128: cuDNN
#: attention is eligible in bf16), 4 query and 2 key/value heads (grouped like the real model).
LLM_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "max_position_embeddings": 2048,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "torch_dtype": "bfloat16",
}


@dataclass(frozen=True)
class TinyPaths:
    root: Path
    config: Path
    model_pt: Path
    llm_dir: Path
    train_jsonl: Path
    val_jsonl: Path
    wav_dir: Path

    def to_dict(self) -> dict:
        return {k: str(v) for k, v in asdict(self).items()}


def paths(out_dir: str | os.PathLike) -> TinyPaths:
    root = Path(out_dir).resolve()
    return TinyPaths(
        root=root,
        config=root / CONFIG,
        model_pt=root / WEIGHTS,
        llm_dir=root / "Qwen3-tiny",
        train_jsonl=root / "data" / FILE_NAMES["train"],
        val_jsonl=root / "data" / FILE_NAMES["valid"],
        wav_dir=root / "data" / "wav",
    )


def is_built(out_dir: str | os.PathLike) -> bool:
    p = paths(out_dir)
    return all(x.exists() for x in (p.config, p.model_pt, p.train_jsonl, p.val_jsonl, p.llm_dir))


def model_config(p: TinyPaths) -> dict:
    """config.yaml: the real model classes, tiny sizes, absolute paths, nothing from a hub."""
    return {
        "model": "FunASRNano",
        "model_conf": {"length_normalized_loss": False},
        "audio_encoder": "SenseVoiceEncoderSmall",
        "audio_encoder_conf": {
            "output_size": 64,
            "attention_heads": 2,
            "linear_units": 128,
            "num_blocks": 2,
            "tp_blocks": 1,
            "dropout_rate": 0.1,
            "positional_dropout_rate": 0.1,
            "attention_dropout_rate": 0.1,
            "kernel_size": 11,
            "sanm_shfit": 0,
            "normalize_before": True,
            "freeze": True,
        },
        "audio_adaptor": "Transformer",
        "audio_adaptor_conf": {
            "downsample_rate": 1,
            "ffn_dim": 128,
            "n_layer": 1,
            "attention_heads": 4,
            "freeze": True,
        },
        "llm": "Qwen3-tiny",
        "llm_conf": {
            "hub": "hf",
            "freeze": False,
            "llm_dtype": "bf16",
            "init_param_path": str(p.llm_dir),
            "use_lora": False,
        },
        "frontend": "WavFrontend",
        "frontend_conf": {
            "fs": SAMPLE_RATE,
            "window": "hamming",
            "n_mels": 80,
            "frame_length": 25,
            "frame_shift": 10,
            "lfr_m": 7,
            "lfr_n": 6,
            "dither": 0.0,
        },
        "tokenizer": "HuggingfaceTokenizer",
        "tokenizer_conf": {"init_param_path": str(p.llm_dir)},
        "dataset": "FunASR",
        "dataset_conf": {
            "index_ds": "FunASR",
            "batch_sampler": "BatchSampler",
            "batch_type": "token",
            "batch_size": 400,
            "sort_size": 1024,
            "max_token_length": 3500,
            "shuffle": True,
            "num_workers": 0,
        },
        "train_conf": {"max_epoch": 1, "log_interval": 1, "grad_clip": 10.0},
        "optim": "adamw",
        "optim_conf": {"lr": 0.0002},
        "scheduler": "warmuplr",
        "scheduler_conf": {"warmup_steps": 100},
    }


def _texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = [
            "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))
            for _ in range(rng.randint(2, 12))
        ]
        out.append(" ".join(words))
    return out


def _train_tokenizer(llm_dir: Path, corpus: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=LLM_CONFIG["vocab_size"] - 16,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:2] + SPECIAL_TOKENS[3:],
    )
    fast.save_pretrained(str(llm_dir))


def _write_wavs_and_jsonl(p: TinyPaths, tokenizer, rng: random.Random, n_train: int, n_val: int) -> None:
    import numpy as np
    import soundfile

    np_rng = np.random.default_rng(rng.randint(0, 2**31))
    p.wav_dir.mkdir(parents=True, exist_ok=True)
    texts = _texts(rng, n_train + n_val)
    # Durations spread over 0.6 to 2.0 s, shuffled. Each utterance gets a distinct declared
    # speech_length + text_length: the recipe's sampler sorts by that sum, so with no ties the
    # batches of every epoch are the same and each (batch, padded length) recurs in the next epoch.
    frames = [60 + round(140 * k / max(len(texts) - 1, 1)) for k in range(len(texts))]
    rng.shuffle(frames)
    used: set[int] = set()
    lines = []
    for i, text in enumerate(texts):
        text_length = len(tokenizer.encode(text))
        while frames[i] + text_length in used:
            frames[i] += 1
        used.add(frames[i] + text_length)
        seconds = (frames[i] + 2) / 100
        n = int(seconds * SAMPLE_RATE)
        t = np.arange(n) / SAMPLE_RATE
        tone = 0.1 * np.sin(2 * np.pi * (150 + 50 * (i % 7)) * t)
        wav = (tone + 0.02 * np_rng.standard_normal(n)).astype("float32")
        path = p.wav_dir / f"utt{i:04d}.wav"
        soundfile.write(str(path), wav, SAMPLE_RATE, subtype="PCM_16")
        # As the recipe's data tools write them: fbank frames (10 ms) and text tokens.
        lines.append(chatml.dumps(chatml.record(f"utt{i:04d}", str(path), text, frames[i], text_length)))
    p.train_jsonl.parent.mkdir(parents=True, exist_ok=True)
    p.train_jsonl.write_text("\n".join(lines[:n_train]) + "\n", encoding="utf-8")
    p.val_jsonl.write_text("\n".join(lines[n_train:]) + "\n", encoding="utf-8")


def build(out_dir: str | os.PathLike, *, seed: int = 0, n_train: int = 48, n_val: int = 4) -> TinyPaths:
    """Write the tiny model and data into out_dir (created; existing files are overwritten)."""
    variables.export(OFFLINE_ENV)
    p = paths(out_dir)
    p.root.mkdir(parents=True, exist_ok=True)
    p.llm_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)

    corpus = [
        chatml.SYSTEM_PROMPT,
        chatml.USER_PROMPT,
        "Speech transcription:",
        *_texts(random.Random(seed + 1), 400),
    ]
    _train_tokenizer(p.llm_dir, corpus)
    (p.llm_dir / "config.json").write_text(json.dumps(LLM_CONFIG, indent=2, sort_keys=True) + "\n")

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(p.llm_dir))
    if len(tokenizer) > LLM_CONFIG["vocab_size"]:
        raise RuntimeError(f"tokenizer has {len(tokenizer)} tokens > vocab_size {LLM_CONFIG['vocab_size']}")
    _write_wavs_and_jsonl(p, tokenizer, rng, n_train, n_val)

    conf = model_config(p)
    import yaml

    p.config.write_text(yaml.safe_dump(conf, sort_keys=False, allow_unicode=True), encoding="utf-8")

    import torch

    tables = quiet_funasr_import()
    frontend = tables.frontend_classes.get(conf["frontend"])(**conf["frontend_conf"])
    torch.manual_seed(seed)
    model_class = tables.model_classes.get(conf["model"])
    model = model_class(input_size=frontend.output_size(), **json.loads(json.dumps(conf)))
    torch.save(model.state_dict(), p.model_pt)
    (p.root / "tiny.json").write_text(
        json.dumps({"seed": seed, "n_train": n_train, "n_val": n_val, "paths": p.to_dict()}, indent=2) + "\n"
    )
    return p
