"""The fast path's levers past upstream, on the CPU with the tiny Fun-ASR-Nano:

- `nosync` (ftenv.trainer.fastpath.sync_free): FunASRNano's forward without host syncs gives FunASR's
  loss, accuracy and every logged statistic, trains to the same losses, and makes no host sync
  where FunASR's makes about three per batch row plus its statistics' (counted with
  benchmarks.matrix.stepcount's TorchDispatchMode, the one the benchmarks count by);
- `lmhead` (ftenv.trainer.fastpath.labelled_head): the LM head and the loss over labelled positions
  only give FunASR's loss and accuracy;
- no KV cache in validation: train steps, a validation pass (eval mode, no_grad, as FunASR's
  trainer validates) and train steps again under the regional decoder with Dynamo's test backend
  recompile at most twice (with the cache built in evaluation, each layer recompiled).
"""

from __future__ import annotations

import copy

import pytest
import torch

from benchmarks.matrix import measure, stepcount
from benchmarks.matrix.model import build_model
from ftenv.selfcheck import tinymodel
from ftenv.selfcheck.loop import prepare, train
from ftenv.trainer.fastpath import compiled_audio, compiled_decoder, labelled_head, sync_free


@pytest.fixture(scope="module")
def prepared(prepared_tiny):
    return prepared_tiny(6, dropout=False)


def _forward(model, batch):
    fresh = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in batch.items()}
    return model(**fresh)


def test_sync_free_forward_gives_funasrs_loss_accuracy_and_statistics(prepared):
    model = copy.deepcopy(prepared.model)
    model.train()
    for batch in prepared.batches[:4]:
        torch.manual_seed(0)
        want_loss, want_stats, want_weight = _forward(model, batch)
        assert sync_free.install(model) is None
        torch.manual_seed(0)
        got_loss, got_stats, got_weight = _forward(model, batch)
        sync_free.remove(model)
        assert "forward" not in model.__dict__
        assert torch.equal(got_loss, want_loss)
        assert got_stats.keys() == want_stats.keys()
        for key, want in want_stats.items():
            got = got_stats[key]
            assert got.dtype == want.dtype and torch.equal(got, want), (key, got, want)
        assert torch.equal(got_weight, want_weight)


def test_sync_free_forward_trains_to_eagers_losses(prepared):
    reference = copy.deepcopy(prepared.model)
    _, want = train(reference, prepared.batches, "cpu")
    model = copy.deepcopy(prepared.model)
    sync_free.install(model)
    _, got = train(model, prepared.batches, "cpu")
    assert max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True)) <= 1e-6


def test_sync_free_forward_makes_no_host_sync(prepared):
    model = copy.deepcopy(prepared.model)
    batch = max(prepared.batches, key=lambda b: b["input_ids"].shape[0])
    rows = int(batch["input_ids"].shape[0])
    counting = stepcount.op_counter()
    with counting() as funasr:
        _forward(model, batch)[0].backward()
    sync_free.install(model)
    compiled_audio.install_adaptor_forward(model)  # the `audio` part's mask: no `lengths.tolist()`
    with counting() as ours:
        _forward(model, batch)[0].backward()
    # FunASR's: a scalar read per row and turn, two per splice, the statistics' four and its masks.
    assert funasr.n["syncs"] >= 3 * rows + 4, dict(funasr.sync_names)
    # What is left is transformers' own: sdpa_mask reads `padding_mask.all()` twice to see whether
    # it may drop the mask (inside the compiled region with the whole-stack `decoder` part).
    assert ours.n["syncs"] <= 2, dict(ours.sync_names)
    assert set(ours.sync_names) <= {"aten::_local_scalar_dense"}, dict(ours.sync_names)


def test_labelled_head_gives_funasrs_loss_and_accuracy_and_trains_to_eagers_losses(prepared):
    """`lmhead`: the head over labelled positions only, positions from the collator (CPU) or, without
    them, found on the device: FunASR's loss and accuracy, and eager's losses over training."""
    model = copy.deepcopy(prepared.model)
    model.train()
    for batch in prepared.batches[:3]:
        want_loss, want_stats, _ = _forward(model, batch)
        sync_free.install(model, labelled=True)
        for given in (labelled_head.add_label_index(dict(batch)), batch):
            got_loss, got_stats, _ = _forward(model, given)
            assert torch.allclose(got_loss, want_loss, rtol=1e-6, atol=0), (got_loss, want_loss)
            assert torch.equal(got_stats["acc"], want_stats["acc"])
            assert torch.equal(got_stats["batch_size_real_tokens"], want_stats["batch_size_real_tokens"])
        sync_free.remove(model)
    _, want = train(copy.deepcopy(prepared.model), prepared.batches, "cpu")
    sync_free.install(model, labelled=True)
    _, got = train(model, [labelled_head.add_label_index(dict(b)) for b in prepared.batches], "cpu")
    assert max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True)) <= 1e-6


def test_sync_free_leaves_a_remote_code_model_as_it_is(prepared):
    class RemoteNano(type(prepared.model)):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    model = copy.deepcopy(prepared.model)
    model.__class__ = RemoteNano
    why = sync_free.install(model)
    assert why and "not funasr's packaged FunASRNano.forward" in why and "forward" not in model.__dict__


def test_validation_does_not_recompile_the_regional_decoder(tiny, tmp_path):
    """Train, validate (eval, no_grad) and train again: the layers' graphs are reused, the
    validation pass adds its eval graph, nothing recompiles per layer."""
    model = build_model(tinymodel.paths(tiny), tmp_path, {"num_hidden_layers": 4}, None, None, "fp32")
    batches = prepare(tiny, "cpu", 4, 1, 0, "fp32").batches
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled_decoder.install_regional(model, devices=("cpu",), backend="eager")
    try:
        t = measure.train_steps(model, batches[:6], "cpu", val=batches[6:8], val_at=3)
    finally:
        compiled_decoder.uninstall(model)
    counted = None not in t.graphs and None not in t.graphs_around_validation
    assert counted, "torch._dynamo's counters are gone"
    assert len(t.val_losses) == 2 and len(t.losses) == 6
    assert t.graphs[-1] - t.graphs[0] <= 2, (t.graphs, t.graphs_around_validation)
