"""The image's layers by change rate (docs/releasing.md, "Layers"), on the built image.

The rebuild test reads the rebuild of conftest.py's `rebuilt` (shared with the CA check: FunASR's
entry of the lock changed, as a FunASR bump does, in a copy of the checkout) and requires the torch
layer and every layer under it to keep their digests. The rebuild takes a few minutes: the rest of
the lock is reinstalled (from pip's cache mount) and what follows.
"""

from __future__ import annotations

from imagetools.local import layers


def test_torch_stack_then_rest_then_ftenv(image):
    stack = layers.layers(image)
    torch_at, rest_at, ftenv_at = (layers.index_of(stack, kind) for kind in ("torch", "rest", "ftenv"))
    assert torch_at < rest_at < ftenv_at
    # the torch stack is the bulk of the image, the rest much smaller
    assert stack[torch_at].size > 2 * stack[rest_at].size > 0


def test_a_rest_of_lock_change_keeps_the_torch_layer(image, rebuilt):
    from ftenv.stack import versions

    assert rebuilt.variant in versions.load().variants
    built = rebuilt.built
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # the build no longer warns about the non-root user's pip cache
    assert "is not owned" not in built.stdout + built.stderr
    problems, added = layers.compare(layers.layers(image), layers.layers(rebuilt.tag))
    assert problems == []
    # what changed starts at the rest of the lock: its lock file's COPY, then its install
    assert "rest.txt" in added[0].created_by or "rest" in added[0].holds, added[0]
    assert any("rest" in layer.holds for layer in added), added
