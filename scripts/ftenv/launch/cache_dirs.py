"""Where a run's caches go: where the image puts them (under HOME), or under the temporary directory
when that is not writable (a read-only root filesystem, a job's own uid and gid, as under enroot,
pyxis or Kubernetes), so that a run does not die at the first cache a library creates.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, replace
from pathlib import Path

from ftenv import variables

#: Each cache variable and where its library writes when it is unset (relative to HOME; None:
#: the library's default is under the temporary directory already, only a set value is checked).
CACHE_VARS: tuple[tuple[str, str | None], ...] = (
    (variables.XDG_CACHE_HOME, ".cache"),
    (variables.HF_HOME, ".cache/huggingface"),
    (variables.MODELSCOPE_CACHE, ".cache/modelscope"),
    (variables.TORCH_HOME, ".cache/torch"),
    (variables.TORCH_EXTENSIONS_DIR, ".cache/torch_extensions"),
    (variables.TORCHINDUCTOR_CACHE_DIR, None),
    (variables.TRITON_CACHE_DIR, ".triton/cache"),
    (variables.TRITON_HOME, ""),  # Triton's dumps and overrides: TRITON_HOME/.triton
    (variables.CUDA_CACHE_PATH, ".nv/ComputeCache"),  # the driver's JIT cache
    (variables.MPLCONFIGDIR, ".config/matplotlib"),
)


#: Names the variables this rule repointed, so that a later, better place (a compiled run's cache
#: under its output dir, ftenv.launch.compile_cache) can tell them from ones the user chose.


def moved_here(environ: Mapping[str, str]) -> set[str]:
    """The cache variables that this rule (not the user) set in `environ`."""
    return set((variables.read(variables.CACHES_MOVED, environ) or "").split())


@dataclass(frozen=True)
class Moved:
    home: Path  # the HOME whose caches could not be written
    base: Path  # the folder they now point under
    under: dict[str, Path]  # each variable's path under base

    @property
    def env(self) -> dict[str, str]:
        """The variables to set."""
        return {name: str(self.base / rel) for name, rel in self.under.items()}

    @property
    def line(self) -> str:
        """What to print, once."""
        return (
            f"caches: {', '.join(self.under)} not writable here (HOME {self.home}; uid {os.getuid()} "
            f"gid {os.getgid()}, or a read-only root filesystem): they go under {self.base} instead"
        )


def writable(path: Path) -> bool:
    """True if `path` is a writable folder, or could be created: its nearest existing ancestor is a
    writable folder. os.access() says no on a read-only filesystem too."""
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    return existing is not None and existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)


def moves_needed(environ: Mapping[str, str] | None = None, tmp: str | None = None) -> Moved | None:
    """The cache variables to repoint, or None when every cache can be written where it is; nothing
    created (made creates the folder)."""
    home = Path((os.environ if environ is None else environ).get("HOME") or os.path.expanduser("~"))
    unwritable: list[tuple[str, Path]] = []
    for name, default in CACHE_VARS:
        value = variables.read(name, environ)
        if value:
            path = Path(value)
        elif default is None:
            continue
        else:
            path = home / default
        if not writable(path):
            unwritable.append((name, path))
    tmp_dir = Path(tmp or tempfile.gettempdir())
    if not unwritable or not writable(tmp_dir):  # nowhere better: leave them (and the error theirs)
        return None
    under: dict[str, Path] = {}
    for name, path in unwritable:
        # Under HOME: the same place under the new folder (HF_HOME -> base/.cache/huggingface).
        try:
            under[name] = path.relative_to(home)
        except ValueError:
            under[name] = Path(name.lower())
    return Moved(home=home, base=tmp_dir / f"ftenv-cache-{os.getuid()}", under=under)


def made(moved: Moved) -> Moved:
    """The moves with their folder created 0700 (a dry run skips this); on a /tmp shared with other
    users whose folder of that name is not ours, under a fresh one."""
    try:
        moved.base.mkdir(mode=0o700, exist_ok=True)
        if moved.base.stat().st_uid == os.getuid() and os.access(moved.base, os.W_OK | os.X_OK):
            return moved
    except OSError:
        pass
    fresh = tempfile.mkdtemp(prefix=f"ftenv-cache-{os.getuid()}-", dir=moved.base.parent)
    return replace(moved, base=Path(fresh))


def apply(prog: str, moved: Moved, environ: MutableMapping[str, str] | None = None) -> None:
    """Repoint the variables in this process's environment (children inherit it) and say so in one line."""
    changes = {**moved.env, variables.CACHES_MOVED: " ".join(sorted(moved_here(environ) | set(moved.env)))}
    if environ is None:
        variables.export(changes)
    else:
        environ.update(changes)
    print(f"{prog}: {moved.line}", file=sys.stderr, flush=True)


def redirect(prog: str, environ: MutableMapping[str, str] | None = None) -> None:
    """Apply the rule, its folder made, to this process's environment (children inherit it) and say
    so in one line: for a command without a dry run (ftenv selfcheck)."""
    if moved := moves_needed(environ):
        apply(prog, made(moved), environ)
