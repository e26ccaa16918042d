"""The compiled audio side (`--compile-parts audio`) and the regional decoder on the CPU, with the
tiny Fun-ASR-Nano trained in-process:

- the adaptor's device-side mask forward gives FunASR's outputs;
- the audio side compiles without a graph break and without a recompile over new shapes (FunASR's
  own adaptor forward, compiled the same way, breaks the graph at `lengths.tolist()`);
- the regional decoder compiles one graph for all layers with the training forward's
  use_cache=False (with the KV cache it recompiles per layer);
- losses with every CPU-runnable part on match eager's.

Compiled with the `aot_eager` backend: the same Dynamo graphs, guards and AOTAutograd joint graphs
as Inductor, without generating kernels. Inductor's CPU backend runs these parts too, but its
compiles of the three graphs took about 145 s on the 2-core CI machine; Inductor's numerics are
`ftenv selfcheck --compile`'s and the GPU benchmark's.
"""

from __future__ import annotations

import copy

import pytest
import torch

from ftenv.selfcheck.loop import train
from ftenv.trainer.fastpath import compiled_audio, compiled_decoder

CPU = ("cpu",)


@pytest.fixture(scope="module")
def prepared(prepared_tiny):
    """The tiny model and 8 new shapes (each seen twice), dropout 0."""
    return prepared_tiny(8, dropout=False)


@pytest.fixture
def model(prepared):
    m = copy.deepcopy(prepared.model)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield m
    compiled_audio.uninstall(m)
    compiled_decoder.uninstall(m)


def _audio(model, batch):
    speech, lengths = batch["speech"].clone(), batch["speech_lengths"][:, 0]
    with torch.no_grad():
        out, olens = model.encode(speech, lengths)
        return model.audio_adaptor(out, olens)


def test_adaptor_forward_gives_funasrs_outputs(prepared, model):
    for batch in prepared.batches[:6]:
        want, want_lens = _audio(model, batch)
        model.audio_adaptor.forward = compiled_audio.adaptor_forward(model.audio_adaptor)
        got, got_lens = _audio(model, batch)
        del model.audio_adaptor.forward
        assert torch.equal(got_lens, want_lens)
        assert torch.allclose(got, want, rtol=0, atol=1e-6), (got - want).abs().max()


def _graph_breaks() -> int:
    return sum(torch._dynamo.utils.counters["graph_break"].values())


@pytest.mark.slow
def test_audio_side_compiles_without_graph_breaks_or_recompiles(prepared, model):
    switches = compiled_audio.install(model, devices=CPU, backend="aot_eager")
    graphs = []
    for batch in prepared.batches:
        _audio(model, batch)
        graphs.append(compiled_decoder.graphs_compiled())
    shapes = {tuple(b["speech"].shape[:2]) for b in prepared.batches}
    assert len(shapes) >= 8
    assert _graph_breaks() == 0, dict(torch._dynamo.utils.counters["graph_break"])
    # The first block (560 wide), the other blocks (one graph for all), the adaptor: no recompile.
    assert graphs[0] == graphs[-1] == 3, graphs
    assert all(s.calls["eager"] == 0 for s in switches)


def test_funasrs_own_adaptor_forward_breaks_the_graph(prepared, model):
    """The control: what the device-side mask removes is really there."""
    model.audio_adaptor.forward = compiled_decoder.Switch(
        model.audio_adaptor.forward, devices=CPU, backend="aot_eager"
    )
    _audio(model, prepared.batches[0])
    breaks = torch._dynamo.utils.counters["graph_break"]
    assert _graph_breaks() >= 1 and any("Data dependent" in reason for reason in breaks), dict(breaks)


def _decoder_graphs(model, batch, **kwargs) -> int | None:
    # As in training: the embeddings are trainable, so every layer's input requires grad.
    embeds = torch.randn(batch, 11, model.llm.config.hidden_size, requires_grad=True)
    model.llm.model(inputs_embeds=embeds, attention_mask=torch.ones(batch, 11, dtype=torch.long), **kwargs)
    return compiled_decoder.graphs_compiled()


@pytest.mark.slow
def test_regional_decoder_one_graph_for_all_layers_without_the_kv_cache(model):
    model.train()
    switches = compiled_decoder.install_regional(model, devices=CPU, backend="aot_eager")
    assert len(switches) == model.llm.config.num_hidden_layers == 2
    assert _decoder_graphs(model, 3) == 1  # the training call leaves use_cache unset: no cache
    assert _decoder_graphs(model, 1) == 1  # one sequence: eager, as upstream
    assert switches[0].calls == {"compiled": 1, "eager": 1}
    # The control: with the KV cache, the per-layer cache state recompiles the layer.
    assert _decoder_graphs(model, 3, use_cache=True) >= 2


@pytest.mark.slow
def test_losses_with_the_cpu_parts_match_eager(prepared, model):
    reference = copy.deepcopy(model)
    _, want = train(reference, prepared.batches, "cpu")
    switches = compiled_decoder.install_regional(model, devices=CPU, backend="aot_eager")
    switches += compiled_audio.install(model, devices=CPU, backend="aot_eager")
    graphs = []
    _, got = train(
        model, prepared.batches, "cpu", after_step=lambda: graphs.append(compiled_decoder.graphs_compiled())
    )
    assert graphs[-1] - graphs[0] <= 2, graphs
    assert all(s.calls["compiled"] == len(prepared.batches) for s in switches)
    assert max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True)) <= 1e-6
