"""LoRA on Fun-ASR-Nano's decoder as the pinned FunASR does it (funasr/models/fun_asr_nano/model.py
`_apply_lora_to_llm`, FunASR PR #3456): `llm_conf.use_lora` and `llm_conf.lora_conf` change the
model's tensors (each targeted `nn.Linear` gains `lora_A` and `lora_B`), so a checkpoint of such a
run fits only a model built with the run's llm_conf; the run's config.yaml (written by FunASR's
trainer) records it. Here: those settings read from a run's config and put over a base folder's,
and the fold that makes a plain model of a LoRA checkpoint (W' = W + alpha/r * B @ A, with the
scaling and weight layout of the LoRA layers upstream built: funasr/models/lora/layers.py), for
every export format alike.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

from ftenv import upstream

#: The keys of llm_conf that build the LoRA layers (upstream's names).
USE_LORA, LORA_CONF = "use_lora", "lora_conf"
#: What names a LoRA tensor in a state dict (upstream's lora_state_dict and mark_only_lora_as_trainable).
ADAPTERS = (".lora_A", ".lora_B")


@dataclass(frozen=True)
class Lora:
    """A run's LoRA settings: its llm_conf.lora_conf as written (JSON, so that choices holding it can
    be compared and hashed); upstream's defaults fill what it leaves out when the model is built."""

    lora_conf: str = "{}"

    def llm_conf(self) -> dict:
        return {USE_LORA: True, LORA_CONF: json.loads(self.lora_conf)}


def switched_on(value) -> bool:
    """A LoRA switch (use_lora, lora_only, a freeze) as an override string or as config.yaml holds
    it: the one reading for the check before a run and for the run's config after it."""
    return str(value).strip().lower() in ("true", "1", "yes")


def of_run(run_conf: dict) -> Lora | None:
    """The LoRA settings a run's config.yaml records (None: the run trained no adapters)."""
    llm = run_conf.get("llm_conf")
    if not isinstance(llm, dict) or not switched_on(llm.get(USE_LORA)):
        return None
    conf = llm.get(LORA_CONF) or {}
    return Lora(json.dumps(conf if isinstance(conf, dict) else {}, sort_keys=True))


def applied(conf: dict, lora: Lora | None) -> dict:
    """A copy of a base folder's config with the run's LoRA settings in its llm_conf (as is: None)."""
    if lora is None:
        return conf
    built = copy.deepcopy(conf)
    built["llm_conf"] = {**(built.get("llm_conf") or {}), **lora.llm_conf()}
    return built


def without(conf: dict) -> dict:
    """A copy of a config that builds no LoRA layers: what an export of folded weights writes."""
    plain = copy.deepcopy(conf)
    llm = dict(plain.get("llm_conf") or {})
    llm.pop(LORA_CONF, None)
    llm[USE_LORA] = False
    plain["llm_conf"] = llm
    plain.pop("lora_only", None)
    return plain


def adapter_names(keys) -> list[str]:
    """The LoRA tensors among state-dict keys."""
    return sorted(k for k in keys if k.endswith(ADAPTERS))


def layers(model) -> dict[str, object]:
    """The model's LoRA layers by module name: upstream's (funasr.models.lora.layers.LoRALayer)
    with their adapters."""
    from funasr.models.lora.layers import LoRALayer

    if not hasattr(model, "named_modules"):  # weights standing in for a model that did not build
        return {}
    return {
        name: m
        for name, m in model.named_modules()
        if isinstance(m, LoRALayer) and hasattr(m, "lora_A") and hasattr(m, "lora_B")
    }


def described(model) -> str:
    """The model's adapters in a line for the exported folder's card, as folded."""
    found = layers(model)
    if not found:
        return ""
    first = next(iter(found.values()))
    names = sorted({name.rsplit(".", 1)[-1] for name in found})
    return (
        f"the adapters of {len(found)} decoder layers ({', '.join(names)}; r {first.r}, lora_alpha "
        f"{first.lora_alpha}) are folded into their weights, W' = W + (lora_alpha / r) * B @ A: this "
        "folder loads without LoRA"
    )


def fold(model, state: dict) -> dict:
    """The weights of a checkpoint that fits `model` (built with the run's LoRA settings, the meta
    device will do) with every adapter folded into its layer's weight, as upstream's
    `lora.Linear.eval()` merges it: W += T(B @ A) * scaling, T the transpose when fan_in_fan_out,
    scaling = lora_alpha / r, read from the built layer; the sum in float32, stored in W's dtype.
    No lora_ tensor is left; ValueError for an adapter without its layer (never shipped half-folded)."""
    import torch

    if written_for := upstream.changed(upstream.LORA_FOLD):  # no upstream fold to fall back to
        raise ValueError(
            f"the installed funasr's LoRA code is not what this fold was written from "
            f"({'; '.join(written_for)}): nothing folded; export in the image, whose funasr it was "
            "written for"
        )
    found = layers(model)
    folded = dict(state)
    for name, layer in found.items():
        weight, a, b = (f"{name}.{part}" for part in ("weight", "lora_A", "lora_B"))
        delta = state[b].float() @ state[a].float()
        if layer.fan_in_fan_out:
            delta = delta.T
        w = state[weight]
        with torch.no_grad():
            folded[weight] = (w.float() + delta * layer.scaling).to(w.dtype)
        del folded[a], folded[b]
    left = adapter_names(folded)
    if left:
        raise ValueError(f"LoRA tensors without a LoRA layer in the model: {', '.join(left[:3])}")
    return folded
