"""`ftenv finetune` with FunASR's LoRA overrides (`++llm_conf.use_lora=true`, `++lora_only=true`):
passed through as given, with a line saying what the run trains, and `lora_only` without adapters
(every weight frozen, nothing to train) refused before torchrun."""

from __future__ import annotations

import pytest

from ftenv.launch.inputs import InputError
from support.finetune_launch import overrides_of, work_out

LORA = ("++llm_conf.use_lora=true", "++llm_conf.lora_conf.r=8")


def _lora_notes(p) -> list[str]:
    return [n for n in p.notes if n.startswith("LoRA:")]


def test_upstreams_overrides_pass_through_and_lora_only_is_said(work):
    p = work_out(work, "--gpus-per-node", "1", "--compile", *LORA, "++lora_only=true")
    assert [*LORA, "++lora_only=true"] == overrides_of(p)[-3:]
    said = "LoRA: the decoder's adapters train, every other weight is frozen (lora_only=true)"
    assert _lora_notes(p) == [said]


def test_lora_only_names_the_unfrozen_parts_it_freezes_again(work):
    p = work_out(work, "--gpus-per-node", "1", *LORA, "++lora_only=true", "++audio_adaptor_conf.freeze=false")
    assert "audio_adaptor_conf.freeze=false included" in _lora_notes(p)[0]


def test_adapters_beside_the_recipes_unfrozen_decoder_are_said_with_the_fix(work):
    (note,) = _lora_notes(work_out(work, "--gpus-per-node", "1", *LORA))
    assert "the adapters AND every decoder weight train (llm_conf.freeze=false" in note
    assert "++lora_only=true" in note and "++llm_conf.freeze=true" in note
    (frozen,) = _lora_notes(work_out(work, "--gpus-per-node", "1", *LORA, "++llm_conf.freeze=true"))
    assert "the decoder's weights are frozen" in frozen


def test_no_lora_no_line(work):
    assert _lora_notes(work_out(work, "--gpus-per-node", "1")) == []


def test_lora_only_without_adapters_is_refused(work):
    with pytest.raises(InputError, match=r"\+\+lora_only=true without \+\+llm_conf.use_lora=true"):
        work_out(work, "--gpus-per-node", "1", "++lora_only=true")
