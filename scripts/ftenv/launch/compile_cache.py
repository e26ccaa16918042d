"""Inductor's and Triton's caches for a compiled run under the output directory (or
FTENV_COMPILE_CACHE_DIR, a mount), one sticky folder with a `uid-N/` per user, so that the next run
of the same job starts warm under any uid instead of compiling again in a /tmp lost with the
container.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ftenv import variables
from ftenv.launch import cache_dirs

#: The folder under the output directory.
CACHE_DIRNAME = "compile-cache"
#: The variables Inductor and Triton read, and their subfolder (the compiler caches only; every
#: cache a run may write is ftenv.launch.cache_dirs.CACHE_VARS).
COMPILER_CACHE_VARS = {variables.TORCHINDUCTOR_CACHE_DIR: "inductor", variables.TRITON_CACHE_DIR: "triton"}


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


def cache_env(output_dir: str | os.PathLike, environ=None, mount: str | None = None) -> dict[str, str]:
    """The cache variables for a run writing to output_dir (or to the mount), nothing created (the
    launch runs prepare); those already set in the environment by the user are kept as they are (not
    those that ftenv.launch.cache_dirs moved to the temporary directory: the output dir is where the
    next run finds them)."""
    wanted = cache_paths(cache_root(output_dir, mount))
    moved = cache_dirs.moved_here(environ)
    return {var: path for var, path in wanted.items() if not variables.given(var, environ) or var in moved}
