"""Fun-ASR-Nano transcripts, greedy and deterministic: upstream's path one utterance at a time (the
reference: the pinned funasr's `FunASRNano.inference`, whose `inference_prepare` raises "batch decoding
is not implemented" for more than one input) and a batched path that gives the same hypotheses: the
padded audio through the encoder and adaptor with its lengths, the prompts LEFT-padded with their
attention mask, one `generate` for the batch.

Audio, features and prompt ids of each utterance come from upstream's own `data_load_speech` (so they
are read as FunASR reads them: funasr.utils.load_utils); the attention settings are the process's (the
image's), not changed here.

Long because upstream's path and the batched one must be read side by side with the model they run
on: the batched path repeats upstream's steps (prompt, audio embeddings, dtype, generate options),
and any difference between them is a different hypothesis.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ftenv import variables
from ftenv.model import checkpoints, lora
from ftenv.model import folder as model_folder
from ftenv.model.folder import ModelLoadError
from ftenv.model.funasr_import import OFFLINE_ENV, quiet_funasr_import

#: Upstream's cap on generated tokens (its `max_length` default in inference_llm).
MAX_NEW_TOKENS = 512
#: Utterances decoded together by default (`ftenv eval`, `ftenv transcribe`).
BATCH_SIZE = 16
#: Greedy, stated rather than inherited from a generation_config.
GREEDY = {"do_sample": False, "num_beams": 1}


@dataclass(frozen=True)
class Utterance:
    key: str
    audio: str


@dataclass
class Loaded:
    """A built model with what upstream's inference takes beside it."""

    model: object
    tokenizer: object
    frontend: object
    kwargs: dict
    device: str
    llm_dtype: str  # "bf16" or "fp32"
    notes: list[str] = field(default_factory=list)


@dataclass
class Decoded:
    hypotheses: dict[str, str]
    token_ids: dict[str, list[int]]
    seconds: float  # wall time of the decode (audio reading included)


def pick_device(device: str | None) -> str:
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"--device {device}: no CUDA GPU visible here; use --device cpu")
    return device


def decoder_dtype(device: str) -> str:
    """The LLM decodes in bf16 on a GPU that has it, else in fp32 (a CPU); the encoder and adaptor
    always in fp32, as upstream's. The same for FunASR's folders and transformers' layout."""
    import torch

    return "bf16" if device.startswith("cuda") and torch.cuda.is_bf16_supported() else "fp32"


def read_config(model_dir: Path) -> dict:
    """The folder's config.yaml by the model folder rule (ftenv.model.folder: its paths found and
    made absolute, the LLM and tokenizer files there), and a Fun-ASR-Nano config that builds offline."""
    conf = model_folder.load_config(model_dir)
    config = model_dir / model_folder.CONFIG
    if conf.get("model") != "FunASRNano":
        raise ModelLoadError(f"{config}: not a Fun-ASR-Nano config (model: FunASRNano expected)")
    if (conf.get("audio_encoder_conf") or {}).get("hub") == "ms":
        raise ModelLoadError(f"{config}: audio_encoder_conf.hub: ms downloads the encoder; offline it cannot")
    return conf


def funasr_model(conf: dict, tables) -> tuple:
    """(model, frontend) of a config as FunASR's AutoModel builds them from its registry `tables`:
    model_conf under the config's own keys, the frontend's output size as the model's input_size.
    Where the weights go (eval) and what they must fit (export) are built alike."""
    frontend = tables.frontend_classes.get(conf["frontend"])(**conf.get("frontend_conf", {}))
    model_conf = {**(conf.get("model_conf") or {}), **conf, "input_size": frontend.output_size()}
    return tables.model_classes.get(conf["model"])(**model_conf), frontend


def build(
    model_dir: str | os.PathLike, device: str | None = None, adapters: lora.Lora | None = None
) -> Loaded:
    """The model of a folder's config.yaml, random weights (put_weights gives it a checkpoint's);
    with a LoRA run's `adapters` (its llm_conf's use_lora and lora_conf) over the folder's llm_conf."""
    variables.export(OFFLINE_ENV, keep_set=True)
    model_dir = Path(model_dir)
    conf = lora.applied(read_config(model_dir), adapters)
    device = pick_device(device)
    tables = quiet_funasr_import()
    try:
        model, frontend = funasr_model(conf, tables)
        tokenizer = tables.tokenizer_classes.get(conf["tokenizer"])(**conf["tokenizer_conf"])
    except ModelLoadError:
        raise
    except Exception as exc:
        raise ModelLoadError(
            f"{model_dir}: the model of its config.yaml does not build ({type(exc).__name__}: {exc})"
        ) from None
    llm_dtype = decoder_dtype(device)
    from funasr.models.fun_asr_nano.model import dtype_map

    # The LLM in the dtype it decodes in BEFORE weights arrive: a checkpoint's fp32 weights copied
    # into the config's bf16 LLM would be rounded for good.
    model.llm.to(dtype_map[llm_dtype])
    model.to(device).eval()
    kwargs = {
        **conf,
        "tokenizer": tokenizer,
        "frontend": frontend,
        "device": device,
        "llm_dtype": llm_dtype,
        "disable_pbar": True,
    }
    return Loaded(model, tokenizer, frontend, kwargs, device, llm_dtype)


def use_weights(loaded: Loaded, weights: str | os.PathLike, state: dict | None = None) -> list[str]:
    """Put a checkpoint's (or the folder's model.pt's) weights on the built model: `state`, read
    and fit-checked by `checkpoints.fitted` before, else read and checked here."""
    import torch

    path = Path(weights)
    if state is None:
        state = checkpoints.fitted(loaded.model, path)
    with torch.no_grad():
        notes = checkpoints.put_weights(loaded.model, state, path)
    loaded.model.to(loaded.device).eval()
    return notes


def load_model(
    model_dir: str | os.PathLike, weights: str | os.PathLike | None = None, device=None, adapters=None
) -> Loaded:
    """The folder's model with the given checkpoint's weights (default: the folder's own model.pt);
    `adapters`: the LoRA settings of the checkpoint's run (ModelChoice.adapters)."""
    loaded = build(model_dir, device, adapters)
    loaded.notes += use_weights(loaded, weights or Path(model_dir) / model_folder.WEIGHTS)
    return loaded


def _text(response: str) -> str:
    """Upstream's clean-up of the decoded text (FunASRNano.inference_llm)."""
    return re.sub(r"\s+", " ", response.replace("/sil", " "))


def _until_eos(ids: list[int], eos: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in eos:
            return ids[: i + 1]
    return ids


def _eos_ids(generation_config, tokenizer) -> set[int]:
    eos = generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return set()
    return {int(e) for e in eos} if isinstance(eos, list) else {int(eos)}


def finished(rows, generation_config, tokenizer) -> tuple[list[list[int]], list[str]]:
    """Each generated row's ids up to its first end token, and its text cleaned as upstream's: one
    rule for FunASR's decoder and transformers' (ftenv.evaluate.hf_decode), so their hypotheses agree."""
    eos = _eos_ids(generation_config, tokenizer)
    ids = [_until_eos(row.tolist(), eos) for row in rows]
    texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
    return ids, [_text(t) for t in texts]


def generate_options(loaded: Loaded) -> dict:
    """Greedy, and where the LLM's config names no end token, the tokenizer's (Fun-ASR-Nano's
    answers end with <|im_end|>, its eos): given to upstream's path and the batched one alike."""
    options = dict(GREEDY)
    if loaded.model.llm.generation_config.eos_token_id is None and loaded.tokenizer.eos_token_id is not None:
        options["eos_token_id"] = loaded.tokenizer.eos_token_id
    return options


def decode_one_by_one(
    loaded: Loaded,
    utterances: Sequence[Utterance],
    max_new_tokens: int = MAX_NEW_TOKENS,
    progress: Callable[[int], None] | None = None,
) -> Decoded:
    """Upstream's path: `FunASRNano.inference` on one audio file at a time (its only option)."""
    import torch

    model, kwargs = loaded.model, loaded.kwargs
    recorded: list = []
    generate = model.llm.generate

    def recording(*args, **kw):
        out = generate(*args, **kw)
        recorded.append(out)
        return out

    hyps, ids = {}, {}
    eos = _eos_ids(model.llm.generation_config, loaded.tokenizer)
    begin = time.perf_counter()
    model.llm.generate = recording
    try:
        with torch.no_grad():
            for utt in utterances:
                recorded.clear()
                results, _ = model.inference(
                    [utt.audio],
                    key=[utt.key],
                    **{**kwargs, "max_length": max_new_tokens, "llm_kwargs": generate_options(loaded)},
                )
                hyps[utt.key] = results[0]["text"]
                ids[utt.key] = _until_eos(recorded[-1][0].tolist(), eos)
                if progress:
                    progress(1)
    finally:
        del model.llm.generate  # the instance attribute; the class's method shows again
    _sync(loaded.device)
    return Decoded(hyps, ids, time.perf_counter() - begin)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def left_pad(embeds: list, dtype) -> tuple:
    """(B, T, D) inputs and their (B, T) attention mask, each sequence's padding on its LEFT: the
    decoder continues every sequence from its last position, so the real tokens must end together."""
    import torch

    longest = max(e.shape[0] for e in embeds)
    batch = torch.zeros(len(embeds), longest, embeds[0].shape[-1], dtype=dtype, device=embeds[0].device)
    mask = torch.zeros(len(embeds), longest, dtype=torch.long, device=embeds[0].device)
    for i, e in enumerate(embeds):
        batch[i, longest - e.shape[0] :] = e.to(dtype)
        mask[i, longest - e.shape[0] :] = 1
    return batch, mask


def _prepare(loaded: Loaded, utt: Utterance) -> dict:
    """One utterance's features and prompt ids, by upstream's own code (its chat template and
    data_load_speech, as inference() builds them)."""
    model, kwargs = loaded.model, loaded.kwargs
    prompt = model.get_prompt(kwargs.get("hotwords", []), kwargs.get("language"), kwargs.get("itn", True))
    contents = model.data_template(model.generate_chatml(prompt, utt.audio))
    meta: dict = {}
    kw = {k: v for k, v in kwargs.items() if k not in ("tokenizer", "frontend")}
    return model.data_load_speech(contents, loaded.tokenizer, loaded.frontend, meta_data=meta, **kw)


def decode_batch(loaded: Loaded, batch: Sequence[Utterance], max_new_tokens: int = MAX_NEW_TOKENS):
    """Token ids and texts of one batch: encoder and adaptor on the padded features with their
    lengths, the audio embeddings written into each prompt, prompts left-padded, one generate."""
    import torch
    from funasr.models.fun_asr_nano.device_utils import resolve_autocast_device_type
    from funasr.models.fun_asr_nano.model import dtype_map

    model, device = loaded.model, loaded.device
    prepared = [_prepare(loaded, u) for u in batch]
    feats = [p["speech"][0] for p in prepared]
    lengths = torch.tensor([int(p["speech_lengths"].reshape(-1)[0]) for p in prepared], dtype=torch.int32)
    speech = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True).to(device)
    lengths = lengths.to(device)
    # The encoder runs in fp32, as upstream's (it has fp32-only ops); the LLM in llm_dtype.
    encoder_out, encoder_lens = model.encode(speech, lengths)
    adaptor_out, adaptor_lens = model.audio_adaptor(encoder_out, encoder_lens)
    embedding = model.llm.model.get_input_embeddings()
    dt = dtype_map[loaded.llm_dtype]
    model.llm.to(dt)
    embeds = []
    for i, p in enumerate(prepared):
        ids = p["source_ids"][0].to(device).clone()
        ids[ids < 0] = 0
        e = embedding(ids[None])[0]
        begin = int(p["fbank_beg"].reshape(-1)[0])
        if begin > 0:
            # As upstream: the placeholder's length, or the adaptor's when that is shorter.
            n = min(int(p["fake_token_len"].reshape(-1)[0]), int(adaptor_lens[i]))
            e = e.clone()
            e[begin : begin + n] = adaptor_out[i, :n].to(e.dtype)
        embeds.append(e)
    inputs, mask = left_pad(embeds, dt)
    config = model.llm.config
    with torch.autocast(
        device_type=resolve_autocast_device_type(device), enabled=loaded.llm_dtype != "fp32", dtype=dt
    ):
        out = model.llm.generate(
            inputs_embeds=inputs,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            pad_token_id=config.pad_token_id or config.eos_token_id,
            **generate_options(loaded),
        )
    return finished(out, model.llm.generation_config, loaded.tokenizer)


def decode_batched(
    loaded: Loaded,
    utterances: Sequence[Utterance],
    batch_size: int = BATCH_SIZE,
    max_new_tokens: int = MAX_NEW_TOKENS,
    progress: Callable[[int], None] | None = None,
) -> Decoded:
    """Every utterance in batches of up to batch_size, longest first (less padding per batch)."""
    return in_batches(decode_batch, loaded, utterances, batch_size, max_new_tokens, progress)


def in_batches(one_batch, loaded, utterances, batch_size, max_new_tokens, progress) -> Decoded:
    """The batching both decoders share (this one and transformers' generate, ftenv.evaluate.hf_decode):
    longest first, `one_batch(loaded, batch, max_new_tokens)` giving (ids, texts)."""
    import torch

    order = sorted(utterances, key=lambda u: -_size(u.audio))
    hyps, ids = {}, {}
    begin = time.perf_counter()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            batch_ids, texts = one_batch(loaded, batch, max_new_tokens)
            for utt, i, t in zip(batch, batch_ids, texts, strict=True):
                ids[utt.key], hyps[utt.key] = i, t
            if progress:
                progress(len(batch))
    _sync(loaded.device)
    return Decoded({u.key: hyps[u.key] for u in utterances}, ids, time.perf_counter() - begin)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
