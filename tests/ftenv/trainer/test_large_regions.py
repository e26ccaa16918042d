"""Few large compiled regions (`--compile-parts decoder,audiowhole`), on the CPU with the tiny
Fun-ASR-Nano and Dynamo's `aot_eager` backend (the same graphs and guards as Inductor, no kernels):

- the whole audio side (encoder and adaptor, one function) gives FunASR's encode + adaptor outputs
  and leaves the caller's speech untouched (the encoder scales its input in place: inside a CUDA
  graph an input mutation would keep the graph off);
- a training step calls two compiled regions (the decoder stack, the audio side), not one per
  layer and block, without a graph break or a recompile over new shapes, and trains to eager's
  losses;
- `audio` and `audiowhole` exclude each other, with a message.

CUDA graphs cannot run here: what would be graphed is what the regions count
(benchmarks/dispatch_proxy.py records the regions per step at Fun-ASR-Nano's depth).
"""

from __future__ import annotations

import copy

import pytest
import torch

from ftenv import variables
from ftenv.selfcheck.loop import train
from ftenv.trainer import compile_setting
from ftenv.trainer.fastpath import compiled_audio, compiled_decoder, parts, sync_free

CPU = ("cpu",)


@pytest.fixture(scope="module")
def prepared(prepared_tiny):
    return prepared_tiny(6, dropout=False)


def test_the_whole_audio_side_gives_funasrs_outputs_and_keeps_the_speech(prepared):
    model = copy.deepcopy(prepared.model)
    run = compiled_audio.audio_side(model)
    for batch in prepared.batches[:3]:
        lengths = batch["speech_lengths"][:, 0]
        with torch.no_grad():
            want, want_lens = model.audio_adaptor(*model.encode(batch["speech"].clone(), lengths))
            speech = batch["speech"].clone()
            got, got_lens = run(speech, lengths)
        assert torch.equal(got_lens, want_lens)
        assert torch.allclose(got, want, rtol=0, atol=1e-6), (got - want).abs().max()
        assert torch.equal(speech, batch["speech"])  # not scaled in place
    # The control: FunASR's encode scales its input in place.
    speech = prepared.batches[0]["speech"].clone()
    with torch.no_grad():
        model.encode(speech, prepared.batches[0]["speech_lengths"][:, 0])
    assert not torch.equal(speech, prepared.batches[0]["speech"])


@pytest.mark.slow
def test_a_step_calls_two_compiled_regions_and_trains_to_eagers_losses(prepared):
    model = copy.deepcopy(prepared.model)
    reference = copy.deepcopy(model)
    _, want = train(reference, prepared.batches, "cpu")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    done = parts.apply(model, ("decoder", "audiowhole", "nosync"), None, devices=CPU, backend="aot_eager")
    try:
        _, got = train(model, prepared.batches, "cpu")
    finally:
        parts.remove(model, done)
    switches = done["switches"]
    assert len(switches) == 2
    steps = len(prepared.batches)
    assert [s.calls["compiled"] for s in switches] == [steps, steps], [s.calls for s in switches]
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
    # One graph per region over every new shape (the pinned torch has the private counter: None
    # would mean the counting broke, not a pass).
    assert compiled_decoder.graphs_compiled() == 2
    assert max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True)) <= 1e-6
    assert sync_free.AUDIO_SIDE not in model.__dict__  # removed


def test_audio_and_audiowhole_exclude_each_other():
    with pytest.raises(ValueError, match="exclude each other"):
        compile_setting.compile_parts({variables.COMPILE: "decoder,audio,audiowhole"})
    assert compile_setting.compile_parts({variables.COMPILE: "audiowhole,decoder"}) == (
        "decoder",
        "audiowhole",
    )
