"""The read-only root the container tests run the image under: podman's extra tmpfs mounts off, so
the only writable places are /tmp, the output folder mounted at /out and /dev/shm."""

from __future__ import annotations

import re
from pathlib import Path

#: The line `ftenv finetune` and `ftenv selfcheck` print when they move the caches to /tmp (uid 12345).
CACHE_LINE = re.compile(
    r"^ftenv (finetune|selfcheck): caches: .* they go under /tmp/ftenv-cache-12345 instead$", re.M
)


def read_only(out: Path) -> list[str]:
    """podman run's options for a read-only root with `out` writable at /out."""
    return ["--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp", "-v", f"{out}:/out"]
