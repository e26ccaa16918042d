"""The model and the batches every arm trains: FunASRNano at Fun-ASR-Nano's sizes (or the tiny
model's) with random weights, the tiny offline data's utterances in seeded batches of random sizes,
those batches as an arm's collator gives them, and the model with an arm's parts on."""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path

from benchmarks.matrix.arms import Arm
from ftenv import variables

#: Qwen3-0.6B's published dimensions (its config.json), random weights.
QWEN3_0_6B = {
    "vocab_size": 151936,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 40960,
}
#: Fun-ASR-Nano's audio encoder (SenseVoice-Small) and adaptor sizes.
ENCODER = {"output_size": 512, "attention_heads": 4, "linear_units": 2048, "num_blocks": 50, "tp_blocks": 20}
ADAPTOR = {"downsample_rate": 1, "ffn_dim": 2048, "n_layer": 2}


def build_model(
    tiny, workdir: Path, llm: dict | None, encoder: dict | None, adaptor: dict | None, dtype: str
):
    """FunASRNano with these LLM / encoder / adaptor settings over the tiny model's (None: the tiny
    one's), random weights from seed 0, dropout 0."""
    import torch

    from ftenv.selfcheck import tinymodel

    conf = tinymodel.model_config(tiny)
    if llm:
        llm_dir = workdir / "llm"
        llm_dir.mkdir(parents=True, exist_ok=True)
        (llm_dir / "config.json").write_text(json.dumps({**tinymodel.LLM_CONFIG, **llm}, indent=2))
        conf["llm_conf"]["init_param_path"] = str(llm_dir)
    conf["audio_encoder_conf"].update(encoder or {})
    conf["audio_adaptor_conf"].update(adaptor or {})
    conf["llm_conf"]["llm_dtype"] = dtype
    tables = tinymodel.quiet_funasr_import()
    frontend = tables.frontend_classes.get(conf["frontend"])(**conf["frontend_conf"])
    torch.manual_seed(0)
    model = tables.model_classes.get(conf["model"])(input_size=frontend.output_size(), **conf)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def sizes(args) -> tuple[dict | None, dict | None, dict | None]:
    if args.tiny_model:
        return None, None, None
    llm = {**QWEN3_0_6B, "num_hidden_layers": args.llm_layers}
    return llm, {**ENCODER, "num_blocks": args.encoder_blocks}, ADAPTOR


def tiny_items(tiny):
    """The tiny data's items, through FunASR's own dataset class (its frontend and tokenizer)."""
    from ftenv.selfcheck import tinymodel

    variables.export(tinymodel.OFFLINE_ENV)
    from funasr import AutoModel

    tables = tinymodel.quiet_funasr_import()
    am = AutoModel(model=str(tiny.root), device="cpu", disable_update=True, disable_log=True)
    kw = am.kwargs
    dataset = tables.dataset_classes.get(kw.get("dataset", "FunASR"))(
        str(tiny.train_jsonl),
        frontend=kw["frontend"],
        tokenizer=kw["tokenizer"],
        is_training=True,
        **dict(kw.get("dataset_conf", {})),
    )
    return dataset, [dataset[i] for i in range(len(dataset))]


def random_batches(dataset, items, n: int, seed: int, min_batch: int, max_batch: int) -> list[dict]:
    rng = random.Random(seed)
    batches = []
    for _ in range(n):
        batch = dataset.collator(rng.sample(items, rng.randint(min_batch, max_batch)))
        batch.pop("item", None)
        batches.append(batch)
    return batches


def prepared(arm: Arm, batches: list[dict]) -> list[dict]:
    """The batches as the arm's collator gives them, through the trainer's own collator hook
    (ftenv.trainer.fastpath.collator) on a stand-in dataset class whose collator hands its batch on."""
    from ftenv.trainer.fastpath import buckets, collator

    class Collated:
        def collator(self, samples=None):
            return dict(samples)

    spec = buckets.parse(arm.buckets) if arm.buckets else None
    collator.install(arm.parts, spec, "Collated", {"Collated": Collated})
    return [Collated().collator(b) for b in batches]


@contextlib.contextmanager
def applied(model, initial, arm: Arm, device: str, backend, cache_root: Path | None = None):
    """The model at its first weights with the arm's parts on, compiling afresh (with `cache_root`,
    on the arm's compile caches there: another arm's, which it starts on, load from disk); the parts
    removed on the way out. Yields apply's record."""
    import torch

    from ftenv.launch.compile_cache import COMPILER_CACHE_VARS
    from ftenv.trainer.fastpath import buckets
    from ftenv.trainer.fastpath.parts import apply, remove

    model.load_state_dict(initial)
    if cache_root is not None:
        cache = cache_root / (arm.cache_of or arm.name)
        variables.export({var: str(cache / sub) for var, sub in COMPILER_CACHE_VARS.items()})
    torch._dynamo.reset()
    with contextlib.suppress(Exception):  # private: the counts then read "unknown"
        torch._dynamo.utils.counters.clear()
    spec = buckets.parse(arm.buckets) if arm.buckets else None
    done = apply(model, arm.parts, spec, devices=(device,), backend=backend)
    try:
        yield done
    finally:
        remove(model, done)
