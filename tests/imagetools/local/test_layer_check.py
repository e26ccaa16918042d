"""The layer check: a FunASR bump changes only the rest layer, and `layers compare` fails when the
torch layer or anything under it changed (tests/container/test_layers.py does it on built images).
"""

from __future__ import annotations

import pytest

from imagetools import locks
from support import ROOT

LOCK = (ROOT / "docker/locks/cu130.txt").read_text()


def test_the_layer_check_changes_funasrs_entry_only_and_so_only_the_rest_layer():
    from imagetools.local import layers

    bumped = layers.bump_funasr_entry(LOCK)
    assert bumped != LOCK
    assert locks.parse(bumped)[1].keys() == locks.parse(LOCK)[1].keys()
    before, after = locks.split(LOCK, "cu130.txt"), locks.split(bumped, "cu130.txt")
    assert after["torch"] == before["torch"] and after["rest"] != before["rest"]


def _stack(*ids_and_holds):
    from imagetools.local.layers import Layer

    return [Layer(d, 1, f"step {d}", frozenset(h)) for d, h in ids_and_holds]


def test_layer_compare_passes_when_only_layers_above_the_torch_layer_change():
    from imagetools.local import layers

    before = _stack(("base", ""), ("apt", ""), ("t1", {"torch"}), ("r1", {"rest"}), ("f1", {"ftenv"}))
    after = _stack(("base", ""), ("apt", ""), ("t1", {"torch"}), ("r2", {"rest"}), ("f2", {"ftenv"}))
    problems, added = layers.compare(before, after)
    assert problems == [] and [x.diff_id for x in added] == ["r2", "f2"]


@pytest.mark.parametrize(
    ("after", "phrase"),
    [
        # the torch layer rebuilt (the whole lock in one layer, or the rest installed under it)
        (
            (("base", ""), ("apt", ""), ("t2", {"torch", "rest"}), ("f2", {"ftenv"})),
            "the torch layer changed",
        ),
        # something under the torch layer changed
        (
            (("base", ""), ("apt2", ""), ("t1", {"torch"}), ("r1", {"rest"})),
            "layer 1 (under the torch layer)",
        ),
        # the torch layer moved
        ((("base", ""), ("x", ""), ("apt", ""), ("t1", {"torch"})), "is layer 3 now, 2 before"),
        # no layer installs torch at all
        ((("base", ""), ("apt", "")), "no layer installs site-packages/torch"),
    ],
)
def test_layer_compare_fails_when_the_torch_layer_or_what_is_under_it_changes(after, phrase):
    from imagetools.local import layers

    before = _stack(("base", ""), ("apt", ""), ("t1", {"torch"}), ("r1", {"rest"}))
    problems, _ = layers.compare(before, _stack(*after))
    assert any(phrase in p for p in problems), problems
