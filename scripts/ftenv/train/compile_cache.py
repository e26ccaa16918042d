"""Where Inductor's and Triton's caches go for a compiled training run: under the run's output
directory (or FTENV_COMPILE_CACHE_DIR, a mount), so that the next run of the same job finds them
and starts warm instead of compiling again.

Inductor and Triton keep their caches under /tmp and $HOME/.cache by default: lost with the
container, and on a read-only root file system or with an arbitrary UID (no home) not writable at
all. The layout here works for any UID: `compile-cache/` is made sticky and world-writable (mode
1777, like /tmp) by whoever creates it, and each UID writes below its own `uid-N/`: Inductor and
Triton create their subfolders with the creator's umask, so a second UID could not write into the
first one's. A re-run with the same UID (the image's ftenv user, 1000, or the same arbitrary UID
of a Kubernetes/OpenShift job) finds its compiled kernels; another UID starts cold, and works.

Caches key on the GPU, CUDA and Triton versions: an H200's cache does not serve a B200 (it is not
wrong, only cold). Kept apart from the other run-time directories the launcher chooses, as its
own rule.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ftenv.train import cache_dirs

#: The folder under the output directory.
CACHE_DIRNAME = "compile-cache"
#: The variables Inductor and Triton read, and their subfolder (the compiler caches only; every
#: cache a run may write is ftenv.train.cache_dirs.CACHE_VARS).
COMPILER_CACHE_VARS = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


def cache_root(output_dir: str | os.PathLike, mount: str | None = None) -> Path:
    """The mount given (FTENV_COMPILE_CACHE_DIR), else compile-cache/ under the output dir."""
    return Path(mount or Path(output_dir) / CACHE_DIRNAME)


def cache_paths(root: str | os.PathLike, uid: int | None = None) -> dict[str, str]:
    """The variables to set for this UID's caches under root (nothing created)."""
    mine = Path(root) / f"uid-{os.getuid() if uid is None else uid}"
    return {var: str(mine / sub) for var, sub in COMPILER_CACHE_VARS.items()}


def prepare(root: str | os.PathLike, uid: int | None = None) -> dict[str, str]:
    """Create the cache folders for this UID under root; return the variables to set."""
    root = Path(root)
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    if created or root.stat().st_uid == os.getuid():
        with contextlib.suppress(OSError):  # a mount we may not chmod: its own permissions decide
            os.chmod(root, 0o1777)
    env = cache_paths(root, uid)
    for path in env.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    return env


def cache_env(
    output_dir: str | os.PathLike, environ=os.environ, mount: str | None = None, create: bool = True
) -> dict[str, str]:
    """The cache variables for a run writing to output_dir (or to the mount); those already set in
    the environment by the user are kept as they are (not those that ftenv.train.cache_dirs moved
    to the temporary directory: the output dir is where the next run finds them)."""
    root = cache_root(output_dir, mount)
    wanted = prepare(root) if create else cache_paths(root)
    moved = cache_dirs.moved_here(environ)
    return {var: path for var, path in wanted.items() if not environ.get(var) or var in moved}
