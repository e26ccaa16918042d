"""A TEST AID, never on by default: attention sleeps the first time it sees a shape, imitating
cuDNN's per-shape plan builds on any machine, so that tests show the self-check FAIL with it and
PASS without it.
"""

from __future__ import annotations

import functools
import time

from ftenv import variables


def install(seconds: float):
    """Wrap SDPA; returns a function that undoes it. Returns None when seconds <= 0."""
    if seconds <= 0:
        return None
    import torch.nn.functional as F

    original = F.scaled_dot_product_attention
    seen: set = set()

    @functools.wraps(original)
    def stalled_sdpa(query, key, value, attn_mask=None, *args, **kwargs):
        shape = (
            tuple(query.shape),
            tuple(key.shape),
            None if attn_mask is None else tuple(attn_mask.shape),
        )
        if shape not in seen:
            seen.add(shape)
            time.sleep(seconds)
        return original(query, key, value, attn_mask, *args, **kwargs)

    stalled_sdpa.ftenv_injected_stall = seconds
    F.scaled_dot_product_attention = stalled_sdpa

    def undo() -> None:
        F.scaled_dot_product_attention = original

    return undo


def install_from_env(environ=None):
    raw = variables.read(variables.TEST_SDPA_STALL_S, environ)
    if not raw:
        return None
    return install(float(raw))
