"""The upstream boundary: every place where ftenv replaces or hooks FunASR's or torch's own code,
with the sha256 of each upstream function's source as it was written from (the funasr and torch
versions.toml pins), so that a bump that changes that code turns the part off with one line
(upstream's code then runs) instead of training something else, and fails its contract test
(tests/ftenv/test_upstream.py) naming the fix. Standard library only: every wing may call it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Hook:
    """One part of ftenv that replaces (a copy written from upstream's source) or wraps upstream
    code: its name as the log says it, the module that installs it, and each upstream function it
    rests on ("module:Qualified.name") with the sha256 of that function's source."""

    part: str
    home: str
    sources: tuple[tuple[str, str], ...]


SYNC_FREE = Hook(
    "nosync/lmhead (FunASRNano's forward without host syncs)",
    "ftenv.trainer.fastpath.sync_free",
    (
        (
            "funasr.models.fun_asr_nano.model:FunASRNano.forward",
            "3ffbab624df4c2ba18844d6602c5768d3f31d6afec6f52af35a02034e7c00db7",
        ),
    ),
)
ADAPTOR_MASK = Hook(
    "audio/buckets (the adaptor's device-side padding mask)",
    "ftenv.trainer.fastpath.compiled_audio",
    (
        (
            "funasr.models.llm_asr.adaptor:Transformer.forward",
            "b98280e51e5995741a5534508f195e6f8a2f1d707d5305998c1fc3cf7bcde965",
        ),
    ),
)
COLLATOR = Hook(
    "lmhead/audiocache/buckets (the batch additions of FunASR's collator)",
    "ftenv.trainer.fastpath.collator",
    (
        (
            "funasr.register:tables.dataset_classes[FunASR].collator",
            "b379da07a576eeead0fe47415150879a3971679d820a0a0d2dd5acc939a92249",
        ),
    ),
)
DATA_LOSS = Hook(
    "data-loss counting",
    "ftenv.data.runtime",
    (
        (
            "funasr.register:tables.dataset_classes[FunASR].__init__",
            "4283799b4ce74ab953cd0e9eed2a4d1eaef1e3a7fe0744acdfa2eb9a60839fa0",
        ),
        (
            "funasr.register:tables.dataset_classes[FunASR].__getitem__",
            "0cfe449810ee8dc664fce4d8ef977991b8f30b71cf1a7c3cd21dca4b3223c624",
        ),
        (
            "funasr.register:tables.dataset_classes[FunASR].collator",
            "b379da07a576eeead0fe47415150879a3971679d820a0a0d2dd5acc939a92249",
        ),
        (
            "funasr.datasets.audio_datasets.samplers:CustomDistributedBufferDynamicBatchSampler.__iter__",
            "57cd5981087543e8066ab570b9a35259367725ceb37c0e8b650e2edf79884673",
        ),
    ),
)
RUN_LIFE = Hook(
    "the run's life in the trainer (stop on a signal, atomic checkpoints, the bounded close)",
    "ftenv.trainer.runlife.hooks",
    (
        (
            "funasr.train_utils.trainer_ds:Trainer.save_checkpoint",
            "2df83b98b762fbbbb08b7f851a89a4130a59656161a8132d901037cb0f585984",
        ),
        (
            "funasr.train_utils.trainer_ds:Trainer.resume_checkpoint",
            "e2c7e272ea5d4a4713c95afebc538b7a92d912765f82334078dbc2325f01b817",
        ),
        (
            "funasr.train_utils.trainer_ds:Trainer.train_epoch",
            "c4776e0049c89e612296eaa79825d77c59079199d35bfe39f7bd8a9fd0848ed8",
        ),
        (
            "funasr.train_utils.trainer_ds:Trainer.close",
            "e3decb49ddd387b3ac85b8139b67220bb814827e8c2e6421fa300a6fab92b36f",
        ),
    ),
)
MODEL_BUILD = Hook(
    "the compile parts (on every model FunASR's AutoModel builds)",
    "ftenv.trainer.fastpath.parts",
    (
        (
            "funasr.auto.auto_model:AutoModel.build_model",
            "5d5be5421456c787b248e11e71000397764741fa4c05a5d5fb65258b77899b65",
        ),
    ),
)
TORCHRUN_GRACE = Hook(
    "torchrun's longer wait for its workers after a signal",
    "ftenv.launch.runlife.torchrun",
    (
        (
            "torch.distributed.elastic.multiprocessing.api:_terminate_process_handler",
            "690db341fcce4d9328a3b6ea683d5427964adcdd268825ad58bcd463c2793ce4",
        ),
        (
            "torch.distributed.elastic.multiprocessing.api:PContext.close",
            "b77c260c4568f068fc903e8d93d231930b4d75701f98e25c543effdb454e7ecc",
        ),
    ),
)
CPU_SHIM = Hook(
    "the CPU shim (FunASR's trainer without CUDA)",
    "ftenv.trainer.funasr_cpu_shim",
    (
        (
            "funasr.train_utils.trainer_ds:Trainer.__init__",
            "e6b180ee0aed0a5ae077a8c62883f463b739c76b90c0286d14705e1021bcc198",
        ),
        (
            "funasr.train_utils.trainer_ds:Trainer.warp_model",
            "ceb3161bcd2cf13c7bbe303378d9a4561689a271363baf051db5e7239df11476",
        ),
        ("funasr.bin.train_ds:main", "66b25f5ded9002e75afcdf86f4a966c3d266fa7d873e90e5e2159227c687e5ab"),
    ),
)
LORA_FOLD = Hook(
    "the LoRA fold of `ftenv export` (written from FunASR's own merge of its LoRA layers)",
    "ftenv.model.lora",
    (
        (
            "funasr.models.lora.layers:Linear.__init__",
            "2c39e04ed019619c723e09e4a41f1ce8930910702d20e25d705b060e5df80107",
        ),
        (
            "funasr.models.lora.layers:Linear.eval",
            "b8cfb0243510f0ff3ea7c6764fcfed3ae89840abe7072cf7961e5217535ec5a1",
        ),
        (
            "funasr.models.fun_asr_nano.model:FunASRNano._apply_lora_to_llm",
            "718b69bedafbe4a2753b209d3e387479bb9621c612397f1e5bf6f382f140dbb3",
        ),
    ),
)
#: Every hook, for the contract test.
HOOKS = (
    SYNC_FREE,
    ADAPTOR_MASK,
    COLLATOR,
    DATA_LOSS,
    RUN_LIFE,
    MODEL_BUILD,
    TORCHRUN_GRACE,
    CPU_SHIM,
    LORA_FOLD,
)
_checked: dict[Hook, str | None] = {}


def resolve(target: str):
    """The upstream object "module:Qualified.name" names, a `name[KEY]` step looking KEY up in a
    mapping (FunASR's registry: two classes of one module may share a name); ImportError,
    AttributeError or KeyError when there is none."""
    module, _, qualname = target.partition(":")
    obj = importlib.import_module(module)
    for step in qualname.split("."):
        name, _, key = step.partition("[")
        obj = getattr(obj, name)
        if key:
            obj = obj[key.rstrip("]")]
    return obj


def source_sha256(target: str) -> str | None:
    """The sha256 of the target's source (through any functools.wraps, so ftenv's own wrappers
    read as what they wrap); None when the target or its source is not there."""
    try:
        text = inspect.getsource(inspect.unwrap(resolve(target)))
    except (ImportError, AttributeError, KeyError, OSError, TypeError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def changed(hook: Hook) -> list[str]:
    """What of the hook's upstream code is not the source it was written from ([] when all is)."""
    found = []
    for target, recorded in hook.sources:
        now = source_sha256(target)
        if now is None:
            found.append(f"{target} is not there")
        elif now != recorded:
            found.append(f"{target} changed (source sha256 {now[:12]}, written from {recorded[:12]})")
    return found


def fix(hook: Hook) -> str:
    """What to do when the hook's upstream code changed."""
    return (
        f"compare {hook.home} with the new upstream source, port what changed, then record the new "
        f"sha256 in ftenv/upstream.py (tests/ftenv/test_upstream.py prints it)"
    )


def refusal(hook: Hook) -> str | None:
    """None when the hook may be installed; else the one line that says it is not and why (checked
    once per process: upstream's code does not change while it runs)."""
    if hook not in _checked:
        found = changed(hook)
        _checked[hook] = (
            f"{hook.part} not installed, upstream's code runs: {'; '.join(found)} (this ftenv was "
            "written against other upstream code)"
            if found
            else None
        )
    return _checked[hook]
