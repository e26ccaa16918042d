"""The user's `++key=value` overrides parsed once into one mapping, as Hydra applies them: the last
value of a key wins, `~key` deletes it, a leading `--` is not an override."""

from __future__ import annotations

import pytest

from ftenv.launch import overrides
from ftenv.launch.inputs import InputError


def test_the_last_value_of_a_key_wins_and_a_deletion_removes_it():
    given = overrides.parse_all(
        ["--", "++train_conf.accum_grad=1", "++model='/m a'", "~optim_conf.lr", "++train_conf.accum_grad=4"]
    )
    assert given.values == {"model": "/m a", "train_conf.accum_grad": 4}
    assert given.deleted == {"optim_conf.lr"}
    recipe = [("optim_conf.lr", "0.0002"), ("train_conf.max_epoch", "50"), ("model", "/base")]
    settings = given.settings(recipe)
    assert settings == {"train_conf.max_epoch": "50", "model": "/m a", "train_conf.accum_grad": 4}
    # The trainer's command line: the defaults no one overrides, then the user's as given.
    assert given.over(recipe) == ["++train_conf.max_epoch=50", *given.items]
    assert overrides.parse_all(["~x", "++x=2"]).settings([("x", "1")]) == {"x": 2}


def test_a_malformed_override_is_refused_once_naming_the_fix():
    with pytest.raises(InputError, match=r"write \+\+train_conf.max_epoch=5"):
        overrides.parse_all(["++a=1", "train_conf.max_epoch=5"])
