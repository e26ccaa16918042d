"""LoRA settings of a run checked before torchrun: the pinned FunASR takes them as overrides
(`++llm_conf.use_lora=true`, `++llm_conf.lora_conf.r=...`, `++lora_only=true`; FunASR PR #3456),
and two of their combinations with the recipe's defaults do not train what a user asking for LoRA
means: `lora_only` without adapters freezes every weight (funasr/bin/train_ds.py calls
mark_only_lora_as_trainable), and adapters beside the recipe's `llm_conf.freeze=false` train every
decoder weight too."""

from __future__ import annotations

from collections.abc import Mapping

from ftenv.launch.inputs import InputError
from ftenv.model.lora import switched_on

USE_LORA, LORA_ONLY, LLM_FREEZE = "llm_conf.use_lora", "lora_only", "llm_conf.freeze"
#: The parts a user unfreezes by their conf (upstream's guidance by hours of data): lora_only freezes them.
UNFREEZABLE = ("audio_encoder_conf.freeze", "audio_adaptor_conf.freeze")


def notes(settings: Mapping[str, object]) -> list[str]:
    """What the trainer's settings (the user's overrides over the recipe) train, said when LoRA is
    asked for; InputError for `lora_only` without adapters."""
    lora, only = switched_on(settings.get(USE_LORA)), switched_on(settings.get(LORA_ONLY))
    if only and not lora:
        raise InputError(
            f"++{LORA_ONLY}=true without ++{USE_LORA}=true: FunASR then freezes every weight (no LoRA "
            f"adapter to train) and the run trains nothing; add ++{USE_LORA}=true (docs/lora.md)"
        )
    if not lora:
        return []
    if only:
        unfrozen = [k for k in UNFREEZABLE if not switched_on(settings.get(k, True))]
        also = f", {' and '.join(unfrozen)}=false included" if unfrozen else ""
        return [f"LoRA: the decoder's adapters train, every other weight is frozen ({LORA_ONLY}=true{also})"]
    if not switched_on(settings.get(LLM_FREEZE, True)):
        return [
            f"LoRA: the adapters AND every decoder weight train ({LLM_FREEZE}=false, the recipe's, and "
            f"no {LORA_ONLY}): add ++{LORA_ONLY}=true to train the adapters only, or "
            f"++{LLM_FREEZE}=true to keep the encoder and adaptor as configured (docs/lora.md)"
        ]
    return [f"LoRA: the adapters train, the decoder's weights are frozen ({LLM_FREEZE}=true)"]
