"""Fixtures that cost seconds to minutes and are read, never changed, by many tests: made once per
pytest run (docs/testing.md, "Time"). tests/conftest.py loads this module as a plugin."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture(scope="session")
def prepared_tiny(tiny) -> Callable:
    """`prepared_tiny(n_new, dropout=True)`: the tiny model loaded by FunASR and its scheduled batches
    (ftenv.selfcheck.loop.prepare, CPU, fp32, seed 0), made once per (n_new, dropout) in a pytest run.
    `dropout=False` sets every dropout to 0: a compiled dropout draws other random numbers than
    eager's, which would hide the numerics. Tests copy the model before training or patching it."""
    import torch

    from ftenv.selfcheck.loop import prepare

    made = {}

    def get(n_new: int, *, dropout: bool = True):
        if (n_new, dropout) not in made:
            p = prepare(tiny, "cpu", n_new, 1, 0, "fp32")
            if not dropout:
                for module in p.model.modules():
                    if isinstance(module, torch.nn.Dropout):
                        module.p = 0.0
            made[n_new, dropout] = p
        return made[n_new, dropout]

    return get
